"""Baseline selection: explicit > pinned > automatic; noise runs skipped; variant respected."""

from __future__ import annotations

from pathlib import Path
from uuid import uuid4

import pytest

from assay.errors import InputError
from assay.regression import Comparison, Counts, RegressionStatus
from assay.runs import baselines
from assay.runs.baselines import BaselineSource, select_baseline
from assay.runs.records import RunAggregate, RunPlan, finish_run, start_run
from assay.runs.scoring import RunMetrics
from assay.store import FileStore
from assay.subject import Subject


def _run(
    store: FileStore,
    variant: str | None = None,
    subject: str = "bot",
    suite: str = "s",
    status: RegressionStatus | None = None,
    finish: bool = True,
) -> RunAggregate:
    plan = RunPlan(
        run_id=str(uuid4()),
        suite=suite,
        suite_version=1,
        subject_kind="agent",
        subject_id=subject,
        variant=variant,
        pass_threshold=0.8,
        outputs="x.jsonl",
        cases=1,
        chunks=0,
    )
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


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "evidence")


def test_automatic_picks_the_latest_earlier_completed_run(store: FileStore) -> None:
    first = _run(store)
    second = _run(store)
    _run(store, finish=False)  # still running: never a baseline
    _run(store, subject="other")
    _run(store, suite="other")
    candidate = _run(store, finish=False)

    assert select_baseline(store, candidate, None) == (second.run_id, BaselineSource.AUTOMATIC)
    assert first.run_id != second.run_id


def test_noise_runs_are_skipped(store: FileStore) -> None:
    good = _run(store, status=RegressionStatus.NO_REGRESSION)
    _run(store, status=RegressionStatus.INCONCLUSIVE_NOISE)
    candidate = _run(store, finish=False)

    assert select_baseline(store, candidate, None) == (good.run_id, BaselineSource.AUTOMATIC)


def test_variant_is_respected_when_given(store: FileStore) -> None:
    v1 = _run(store, variant="v1")
    _run(store, variant="v2")
    candidate = _run(store, variant="v1", finish=False)
    any_variant = _run(store, finish=False)

    assert select_baseline(store, candidate, None) == (v1.run_id, BaselineSource.AUTOMATIC)
    chosen = select_baseline(store, any_variant, None)
    assert chosen is not None and chosen[0] != v1.run_id  # latest of any variant: v2


def test_pinned_beats_automatic_and_explicit_beats_pinned(store: FileStore) -> None:
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


def test_only_completed_runs_can_be_baselines(store: FileStore) -> None:
    running = _run(store, finish=False)
    with pytest.raises(InputError, match="completed"):
        baselines.pin(store, running.run_id)
    with pytest.raises(InputError, match="completed"):
        select_baseline(store, _run(store, finish=False), running.run_id)


def test_no_earlier_run_means_no_baseline(store: FileStore) -> None:
    assert select_baseline(store, _run(store, finish=False), None) is None
