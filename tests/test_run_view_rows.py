"""A large run's report table without a baseline, groups or trials: the rows chosen from the
run's own counts, reading the evidence only until they are settled, are the rows a reading of
every case chooses (every case that did not pass first, then passing ones, in suite order)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.reports.run_view import MAX_CASE_ROWS, load_view
from assay.runs.chunks import read_cases
from assay.scorers import Status
from assay.store import FileStore
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

CASES = 5_000
CHUNK = 1_000


def _run(tmp_path: Path, name: str, failing: set[int]) -> str:
    suite_file = tmp_path / f"{name}.json"
    cases = [
        {"id": f"c-{i:05d}", "input": "q", "scorers": [{"contains": "ok"}]} for i in range(CASES)
    ]
    suite_file.write_text(json.dumps({"suite": name, "cases": cases}))
    outputs = tmp_path / f"{name}.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": f"c-{i:05d}", "output": "no" if i in failing else "ok"}) + "\n"
            for i in range(CASES)
        )
    )
    result = suite_run(
        suite=str(suite_file), outputs=str(outputs), subject=f"agent:{name}", chunk_size=CHUNK
    )
    return result.run_id


def _expected_rows(store: FileStore, run_id: str) -> list[str]:
    every = list(read_cases(store, run_id))
    notable = [c.case_id for c in every if c.status is not Status.PASS][:MAX_CASE_ROWS]
    passing = [c.case_id for c in every if c.status is Status.PASS]
    return sorted(notable + passing[: MAX_CASE_ROWS - len(notable)])


@pytest.mark.parametrize(
    ("name", "failing"),
    [
        ("last-chunk", {3, 700, *range(CASES - 10, CASES)}),  # found only in the last chunk
        ("many", set(range(0, 2 * MAX_CASE_ROWS + 200, 2))),  # the table fills before the end
        ("none", set()),
    ],
)
def test_rows_from_the_runs_counts_are_those_of_every_case(
    tmp_path: Path, store_dir: Path, name: str, failing: set[int]
) -> None:
    store = FileStore(store_dir)
    run_id = _run(tmp_path, name, failing)

    view = load_view(store, run_id)

    assert [row.case_id for row in view.rows] == _expected_rows(store, run_id)
    assert (view.cases, view.omitted) == (CASES, CASES - MAX_CASE_ROWS)
    assert view.tags == {} and view.classes == {} and view.flipped == {}
