"""A run's progress is written for its first chunk, then at most every second and at the end,
not per chunk: the event
stream reads the chunks from the aggregate in batches, each once and in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from assay.runs.metrics import RunMetrics
from assay.runs.records import load_aggregate, start_run
from assay.store import FileStore
from tasks.artifacts import ProgressReporter
from tests.run_plans import a_plan

pytestmark = [
    pytest.mark.usefixtures("prefect_api"),
    pytest.mark.filterwarnings("ignore:Artifact creation outside:FutureWarning"),
]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_is_written_once_a_second_and_at_the_end(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store")
    plan = a_plan(run_id="r-progress", subject_id="a", pass_threshold=0.5, cases=50, chunks=5)
    aggregate = start_run(store, plan)
    clock = Clock()
    reporter = ProgressReporter(store.uri, aggregate, interval=1.0, clock=clock)

    def written() -> list[int]:
        return load_aggregate(store, plan.run_id).chunk_order

    seen = []
    for chunk, at in ((3, 0.1), (0, 0.4), (1, 1.2), (4, 1.5), (2, 1.9)):
        clock.now = at
        reporter.chunk_done(chunk, RunMetrics(cases=10, scored=10, passed=10))
        seen.append(written())
    # The first chunk at once (a follower sees the run start), then at most once a second.
    assert seen == [[3], [3], [3, 0, 1], [3, 0, 1], [3, 0, 1]]
    reporter.flush()
    final = load_aggregate(store, plan.run_id)
    assert (final.chunk_order, final.chunks_done, final.metrics.passed) == ([3, 0, 1, 4, 2], 5, 50)
