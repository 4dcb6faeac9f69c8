"""The report of a run with trials (issue 39, item 2), rendered by headless Chromium: one row per
case with its trial counts and its verdict over its trials, the trials expandable under it, and
the newly failing / newly passing lists counted per case — the flip table's counts.

The runs are the example of docs/runs.md ("Trials"): `examples/trials-suite.yaml` (4 cases,
`majority` of 3 trials) with `examples/outputs/trials-v1.jsonl` and `trials-v2.jsonl`.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.runs.records import EvalResult
from tests.browser import render, require_chromium
from tests.launched import suite_run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
ROW = re.compile(r'<tr data-case-id="([^"]+)" data-s="(\w+)"[^>]*>(.*?)</tr>', re.S)

pytestmark = pytest.mark.usefixtures("prefect_api")


def _flip_list(dom: str, name: str) -> list[str]:
    found = re.search(rf"<h3>{name} \((\d+)\)</h3><ul>(.*?)</ul>", dom, re.S)
    if found is None:
        return []
    ids = re.findall(r"<li>(.*?)</li>", found.group(2))
    assert len(ids) == int(found.group(1))
    return ids


def _flip_table(dom: str) -> dict[str, int]:
    table = re.search(r'aria-label="flip table">(.*?)</table>', dom, re.S)
    assert table is not None
    cells = [int(n) for n in re.findall(r'<td class="num">(\d+)</td>', table.group(1))]
    return dict(
        zip(("both pass", "newly failing", "newly passing", "both fail"), cells, strict=True)
    )


def test_the_trials_report_lists_cases_with_their_trials_and_counts_flips_per_case(
    store_dir: Path, tmp_path: Path
) -> None:
    require_chromium()
    runs: list[EvalResult] = []
    for version in ("v1", "v2"):
        result = suite_run(
            suite=str(EXAMPLES / "trials-suite.yaml"),
            outputs=str(EXAMPLES / "outputs" / f"trials-{version}.jsonl"),
            subject=f"agent:support-bot@{version}",
            baseline=runs[0].run_id if runs else None,
        )
        runs.append(result)
    v1, v2 = runs
    assert (v1.metrics.passed, v2.metrics.passed, v2.metrics.cases) == (2, 3, 4)
    page = tmp_path / "trials.html"
    done = CliRunner().invoke(app, ["report", v2.run_id[:8], "-o", str(page)])
    assert done.exit_code == 0, done.output
    rendered = render(page)
    assert rendered.console == []

    found = ROW.findall(rendered.dom)
    assert len(found) == 4  # one row per case, not one per trial
    rows = {case: (status, cells) for case, status, cells in found}
    assert list(rows) == ["return-window", "express-price", "cancel-order", "final-sale-return"]
    statuses = {case: status for case, (status, _) in rows.items()}
    assert statuses == {
        "return-window": "fail",
        "express-price": "pass",
        "cancel-order": "pass",
        "final-sale-return": "pass",
    }
    # Each row: its trial counts, expanding to its three trials; the label of the verdict.
    counts = {
        case: re.findall(r"<summary[^>]*>(\d+/\d+)</summary>", cells)
        for case, (_, cells) in rows.items()
    }
    assert counts == {
        "return-window": ["1/3"],
        "express-price": ["2/3"],
        "cancel-order": ["3/3"],
        "final-sale-return": ["3/3"],
    }
    assert all(len(re.findall(r"<li data-trial=", cells)) == 3 for _, cells in rows.values())
    assert "1/3 trials passed (majority)" in rows["return-window"][1]
    assert "Cases (4)" in rendered.dom

    table = _flip_table(rendered.dom)
    failing, passing = (
        _flip_list(rendered.dom, "newly failing"),
        _flip_list(rendered.dom, "newly passing"),
    )
    assert (
        (len(failing), len(passing)) == (table["newly failing"], table["newly passing"]) == (1, 2)
    )
    assert failing == ["return-window"]
    assert passing == ["express-price", "cancel-order"]
    changes = {
        case: re.findall(r"<td>(newly \w+|unchanged)</td>", cells)
        for case, (_, cells) in rows.items()
    }
    assert changes == {
        "return-window": ["newly failing"],
        "express-price": ["newly passing"],
        "cancel-order": ["newly passing"],
        "final-sale-return": ["unchanged"],
    }
    # The status filter counts cases, not trials.
    filtered = render(page, "status=fail")
    visible = [
        row for row in re.findall(r"<tr data-case-id=[^>]*>", filtered.dom) if "hidden" not in row
    ]
    assert len(visible) == 1 and "1 of 4 cases shown" in filtered.dom
