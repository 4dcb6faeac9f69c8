"""Compare a finished run with its baseline: choose the baseline, load both sides, compare."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from threading import Lock

from assay.corrected_difference import DifferenceCorrection
from assay.process_state import remembered
from assay.regression import Comparison, Counts, RunSide, compare, no_baseline
from assay.runs.baselines import select_baseline
from assay.runs.chunks import CaseVerdict, read_verdicts
from assay.runs.metrics import RunMetrics
from assay.runs.records import RunAggregate, load_aggregate, load_result
from assay.runs.trial_rule import verdict_over_trials
from assay.scorers import Status
from assay.store import EvidenceStore
from assay.suites import registry


@dataclass(frozen=True, slots=True)
class _Verdicts:
    """What a comparison reads of one run's evidence (`RunSide` holds the same)."""

    verdicts: Mapping[str, bool]
    trajectories: Mapping[str, bool]
    fractions: Mapping[str, float]
    turns: Mapping[str, tuple[float | None, ...]]


_LAST_READ: dict[tuple[str, str, int], _Verdicts] = {}
_LAST_READ_KEPT = 2
_LAST_READ_LOCK = Lock()
remembered(__name__, "_LAST_READ", _LAST_READ.clear, _LAST_READ_LOCK)


def case_verdicts(store: EvidenceStore, run_id: str) -> Mapping[str, bool]:
    """Pass (True) or fail (False) of each scored case of a run, by case id."""
    return _verdicts(store, load_aggregate(store, run_id)).verdicts


def _verdicts(store: EvidenceStore, run: RunAggregate) -> _Verdicts:
    """Each scored case's verdict, each case's trajectory verdict (where it has one), each
    scored case's pass fraction over its scored trials (1.0 or 0.0 without trials), and each
    conversation case's turns as pass fractions the same way. A run with trials decides each
    case over its trials (`verdict_over_trials`).

    The last two runs read are kept: a run's chunks are write-once, and after a comparison the
    per-case table asks again for the baseline's (reading 100,000 cases twice cost seconds).
    """
    key = (store.uri, run.run_id, run.chunks)
    with _LAST_READ_LOCK:
        found = _LAST_READ.get(key)
    if found is not None:
        return found
    read = _read_verdicts(store, run)
    with _LAST_READ_LOCK:
        _LAST_READ[key] = read
        while len(_LAST_READ) > _LAST_READ_KEPT:
            _LAST_READ.pop(next(iter(_LAST_READ)))
    return read


def _read_verdicts(store: EvidenceStore, run: RunAggregate) -> _Verdicts:
    verdicts: dict[str, bool] = {}
    trajectories: dict[str, bool] = {}
    counts: dict[str, tuple[int, int]] = {}
    turn_counts: dict[str, list[list[int]]] = {}
    for number in range(run.chunks):
        for case in read_verdicts(store, run.run_id, number):
            if case.turns is not None:
                _count_turns(turn_counts.setdefault(case.case_id, []), case)
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
    turns = {
        case_id: tuple(c / n if n else None for n, c in per_turn)
        for case_id, per_turn in turn_counts.items()
    }
    return _Verdicts(verdicts, trajectories, fractions, turns)


def _count_turns(per_turn: list[list[int]], case: CaseVerdict) -> None:
    """Add one trial's turns to a conversation's [scored, passed] per turn (a missing turn is
    scored and failed; the unavailable ones after it, and turns not scored, are not)."""
    for turn in case.turns or ():
        while len(per_turn) < turn.turn:
            per_turn.append([0, 0])
        if turn.status is not Status.SKIPPED:
            per_turn[turn.turn - 1][0] += 1
            per_turn[turn.turn - 1][1] += turn.status is Status.PASS


def _scorer_keys(store: EvidenceStore, suite: str, version: int) -> frozenset[str]:
    _, golden = registry.resolve(store, f"{suite}@{version}")
    return frozenset(spec.key for case in golden.cases for spec in golden.scorers_for(case))


def run_side(
    store: EvidenceStore, run: RunAggregate, metrics: RunMetrics, score: float | None
) -> RunSide:
    """Everything the comparison needs about one run, read from its evidence."""
    read = _verdicts(store, run)
    return RunSide(
        run_id=run.run_id,
        passed=metrics.passed,
        scored=metrics.scored,
        score=score,
        suite_version=run.suite_version,
        scorers=_scorer_keys(store, run.suite, run.suite_version),
        verdicts=read.verdicts,
        trajectories=read.trajectories,
        fractions=read.fractions,
        turns=read.turns,
        with_trials=run.trials_policy is not None,
        judge_model=run.judge.model if run.judge else None,
        prompt_version=run.judge.prompt_version if run.judge else None,
        suite=run.suite,
    )


def compare_with_baseline(
    store: EvidenceStore,
    candidate: RunAggregate,
    metrics: RunMetrics,
    threshold: float,
    explicit: str | None = None,
    *,
    cross_suite: bool = False,
    calibration: str | None = None,
) -> Comparison:
    """The candidate's comparison with its baseline (explicit > pinned > automatic; an explicit
    one of another suite only with `cross_suite`); with no baseline, only the candidate's counts
    are read, not its evidence. With a `calibration` set, the judge-corrected paired difference
    is computed and decides (`assay.runs.judge_corrected`)."""
    chosen = select_baseline(store, candidate, explicit, cross_suite=cross_suite)
    if chosen is None:
        return no_baseline(Counts(passed=metrics.passed, scored=metrics.scored), threshold)
    side = run_side(store, candidate, metrics, metrics.score)
    baseline_id, source = chosen
    result = load_result(store, baseline_id)
    baseline = run_side(store, load_aggregate(store, baseline_id), result.metrics, result.score)
    return compare(
        baseline, side, threshold, source, _correction(store, calibration, baseline, side)
    )


def _correction(
    store: EvidenceStore, calibration: str | None, baseline: RunSide, candidate: RunSide
) -> DifferenceCorrection | None:
    if calibration is None:
        return None
    if baseline.with_trials or candidate.with_trials:
        return DifferenceCorrection(
            warning="judge_corrected: runs with trials are compared over trials, not corrected"
        )
    from assay.runs.judge_corrected import correct_difference  # reads the set: on request

    return correct_difference(store, calibration, baseline.run_id, candidate.run_id)
