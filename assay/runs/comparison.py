"""Compare a finished run with its baseline: choose the baseline, load both sides, compare."""

from __future__ import annotations

from assay.regression import Comparison, RunSide, compare, no_baseline
from assay.runs.baselines import select_baseline
from assay.runs.records import RunAggregate, load_aggregate, load_result, read_verdicts
from assay.runs.scoring import RunMetrics, verdict_over_trials
from assay.scorers import Status
from assay.store import EvidenceStore
from assay.suites import registry


def case_verdicts(store: EvidenceStore, run_id: str) -> dict[str, bool]:
    """Pass (True) or fail (False) of each scored case of a run, by case id."""
    return _verdicts(store, load_aggregate(store, run_id))[0]


def _verdicts(
    store: EvidenceStore, run: RunAggregate
) -> tuple[dict[str, bool], dict[str, bool], dict[str, float]]:
    """Each scored case's verdict, each case's trajectory verdict (where it has one), and each
    scored case's pass fraction over its scored trials (1.0 or 0.0 without trials). A run with
    trials decides each case over its trials (`verdict_over_trials`)."""
    verdicts: dict[str, bool] = {}
    trajectories: dict[str, bool] = {}
    counts: dict[str, tuple[int, int]] = {}
    for number in range(run.chunks):
        for case in read_verdicts(store, run.run_id, number):
            if case.status is not Status.SKIPPED:
                n, c = counts.get(case.case_id, (0, 0))
                counts[case.case_id] = (n + 1, c + (case.status is Status.PASS))
            trajectory = case.trajectory_passed
            if trajectory is not None:
                trajectories[case.case_id] = trajectory
    policy = run.trials_policy
    for case_id, (n, c) in counts.items():
        if policy is None:
            verdicts[case_id] = c == n
        elif (status := verdict_over_trials(policy, n, c)) is not Status.SKIPPED:
            verdicts[case_id] = status is Status.PASS
    fractions = {case_id: c / n for case_id, (n, c) in counts.items()}
    return verdicts, trajectories, fractions


def _scorer_keys(store: EvidenceStore, suite: str, version: int) -> frozenset[str]:
    _, golden = registry.resolve(store, f"{suite}@{version}")
    return frozenset(spec.key for case in golden.cases for spec in golden.scorers_for(case))


def run_side(
    store: EvidenceStore, run: RunAggregate, metrics: RunMetrics, score: float | None
) -> RunSide:
    """Everything the comparison needs about one run, read from its evidence."""
    verdicts, trajectories, fractions = _verdicts(store, run)
    return RunSide(
        run_id=run.run_id,
        passed=metrics.passed,
        scored=metrics.scored,
        score=score,
        suite_version=run.suite_version,
        scorers=_scorer_keys(store, run.suite, run.suite_version),
        verdicts=verdicts,
        trajectories=trajectories,
        fractions=fractions,
        with_trials=run.trials_policy is not None,
        judge_model=run.judge.model if run.judge else None,
        prompt_version=run.judge.prompt_version if run.judge else None,
    )


def compare_with_baseline(
    store: EvidenceStore,
    candidate: RunAggregate,
    metrics: RunMetrics,
    threshold: float,
    explicit: str | None = None,
) -> Comparison:
    """The candidate's comparison with its baseline (explicit > pinned > automatic)."""
    side = run_side(store, candidate, metrics, metrics.score)
    chosen = select_baseline(store, candidate, explicit)
    if chosen is None:
        return no_baseline(side, threshold)
    baseline_id, source = chosen
    result = load_result(store, baseline_id)
    baseline = run_side(store, load_aggregate(store, baseline_id), result.metrics, result.score)
    return compare(baseline, side, threshold, source)
