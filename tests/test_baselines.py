"""Baseline selection: explicit > pinned > automatic; noise runs skipped; variant respected."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from assay.errors import InputError
from assay.regression import Comparison, Counts, RegressionStatus
from assay.runs import baselines
from assay.runs.baselines import BaselineSource, select_baseline
from assay.runs.metrics import RunMetrics
from assay.runs.records import RunAggregate, finish_run, start_run
from assay.store import FileStore
from assay.subject import Subject
from tests.run_plans import a_plan


def _run(
    store: ReadCountingStore,
    variant: str | None = None,
    subject: str = "bot",
    suite: str = "s",
    status: RegressionStatus | None = None,
    finish: bool = True,
) -> RunAggregate:
    plan = a_plan(suite=suite, subject_id=subject, variant=variant, chunks=0)
    aggregate = start_run(store, plan)
    if finish:
        regression = None
        if status is not None:
            regression = Comparison(
                baseline_run=None,
                status=status,
                score_drop=None,
                pass_rate_diff=None,
                interval=None,
                threshold=0.05,
                baseline=None,
                candidate=Counts(passed=1, scored=1),
                paired=None,
                changed=[],
            )
        finish_run(store, aggregate, RunMetrics(cases=1, scored=1, passed=1), regression)
    return aggregate


class ReadCountingStore(FileStore):
    """A file store that keeps the keys it was asked for."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.reads: list[str] = []

    def get(self, key: str) -> bytes:
        self.reads.append(key)
        return super().get(key)


@pytest.fixture
def store(tmp_path: Path) -> ReadCountingStore:
    return ReadCountingStore(tmp_path / "evidence")


def test_automatic_picks_the_latest_earlier_completed_run(store: ReadCountingStore) -> None:
    first = _run(store)
    second = _run(store)
    _run(store, finish=False)  # still running: never a baseline
    _run(store, subject="other")
    _run(store, suite="other")
    candidate = _run(store, finish=False)

    assert select_baseline(store, candidate, None) == (second.run_id, BaselineSource.AUTOMATIC)
    assert first.run_id != second.run_id


def test_noise_runs_are_skipped(store: ReadCountingStore) -> None:
    good = _run(store, status=RegressionStatus.NO_REGRESSION)
    _run(store, status=RegressionStatus.INCONCLUSIVE_NOISE)
    candidate = _run(store, finish=False)

    assert select_baseline(store, candidate, None) == (good.run_id, BaselineSource.AUTOMATIC)


def test_variant_is_respected_when_given(store: ReadCountingStore) -> None:
    v1 = _run(store, variant="v1")
    _run(store, variant="v2")
    candidate = _run(store, variant="v1", finish=False)
    any_variant = _run(store, finish=False)

    assert select_baseline(store, candidate, None) == (v1.run_id, BaselineSource.AUTOMATIC)
    chosen = select_baseline(store, any_variant, None)
    assert chosen is not None and chosen[0] != v1.run_id  # latest of any variant: v2


def test_pinned_beats_automatic_and_explicit_beats_pinned(store: ReadCountingStore) -> None:
    old = _run(store, variant="v1")
    newer = _run(store, variant="v1")
    explicit = _run(store, variant="v9")
    candidate = _run(store, variant="v1", finish=False)

    baselines.pin(store, old.run_id)
    assert select_baseline(store, candidate, None) == (old.run_id, BaselineSource.PINNED)
    assert select_baseline(store, candidate, explicit.run_id) == (
        explicit.run_id,
        BaselineSource.EXPLICIT,
    )
    baselines.unpin(store, "s", Subject(kind="agent", id="bot", variant="v1"))
    assert select_baseline(store, candidate, None) == (newer.run_id, BaselineSource.AUTOMATIC)
    assert len(list(store.list("baselines/"))) == 2  # pin and unpin both kept: append-only


def test_only_completed_runs_can_be_baselines(store: ReadCountingStore) -> None:
    running = _run(store, finish=False)
    with pytest.raises(InputError, match="completed"):
        baselines.pin(store, running.run_id)
    with pytest.raises(InputError, match="completed"):
        select_baseline(store, _run(store, finish=False), running.run_id)


def test_no_earlier_run_means_no_baseline(store: ReadCountingStore) -> None:
    assert select_baseline(store, _run(store, finish=False), None) is None


def test_the_automatic_baseline_reads_only_the_subject_s_own_runs(
    store: ReadCountingStore,
) -> None:
    """It read every run in the store (a GET each: on S3 seconds per thousand runs, on every
    run); now the runs of the candidate's suite and subject, newest first."""
    for number in range(30):
        _run(store, subject=f"other-{number}")
    baseline = _run(store)
    candidate = _run(store, finish=False)
    select_baseline(store, _run(store, subject="first"), None)  # a store's first search
    store.reads.clear()

    assert select_baseline(store, candidate, None) == (baseline.run_id, BaselineSource.AUTOMATIC)
    read_runs = {key.split("/")[1] for key in store.reads if key.startswith("runs/")}
    assert read_runs <= {baseline.run_id, candidate.run_id}, len(read_runs)


def test_runs_recorded_before_the_subject_index_are_indexed_once(
    store: ReadCountingStore,
) -> None:
    earlier = _run(store)
    for number in range(10):
        _run(store, subject=f"other-{number}")
    shutil.rmtree(store.root / "index" / "subjects")  # as a store written before the index
    (store.root / "index" / "subjects.complete").unlink(missing_ok=True)
    candidate = _run(store, finish=False)

    assert select_baseline(store, candidate, None) == (earlier.run_id, BaselineSource.AUTOMATIC)
    assert store.exists("index/subjects.complete")
    store.reads.clear()
    assert select_baseline(store, candidate, None) == (earlier.run_id, BaselineSource.AUTOMATIC)
    assert len({key.split("/")[1] for key in store.reads if key.startswith("runs/")}) <= 2
