"""Regression: did this run get worse than its baseline? (SPEC §7)

Differences are *baseline minus candidate*, so a drop is positive. A run has **regressed** when its
mean score dropped by more than the suite's `regression_threshold` *and* the 95% Newcombe hybrid
score interval of the pass-rate difference lies above 0 (the baseline's pass rate is credibly
higher). A drop above the threshold whose interval includes 0 is `inconclusive_noise`: too little
data to tell, never reported as a regression. When both runs scored exactly the same cases, the
paired analysis (Newcombe's paired interval and the exact McNemar test) is added: it uses the
case-by-case pairing and has more power on the same data. When either run has trials, the
interval that decides is the paired one over per-case pass fractions (`TrialsComparison`, Miller
2024). With a calibration set, the judge-corrected paired difference (PPI++ over the shared
cases, `judge_corrected`) decides instead, its estimate standing for the score drop; `decided_by`
names the interval each rule read. Every comparison reports the smallest drop its two runs could
detect. Runs of conversation cases add the conversations' flips with their first changed turn and
the paired, clustered difference of turn-level pass rates (`ConversationComparison`,
docs/EVAL-METHODOLOGY.md, "Conversations").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, Field

from assay.corrected_difference import CorrectedDifference, DecidedBy, DifferenceCorrection
from assay.error_bars import paired_clustered_diff, paired_mean_diff
from assay.stats import mcnemar_exact, minimum_detectable_drop, newcombe_diff, paired_diff


class RegressionStatus(StrEnum):
    """Outcome of a comparison."""

    REGRESSED = "regressed"
    INCONCLUSIVE_NOISE = "inconclusive_noise"
    NO_REGRESSION = "no_regression"
    NO_BASELINE = "no_baseline"


class Counts(BaseModel):
    """A pass-rate numerator and denominator."""

    passed: int
    scored: int


MAX_LISTED_FLIPS = 100


class PairedAnalysis(BaseModel):
    """Case-by-case comparison over the same scored cases (baseline first)."""

    both_pass: int
    baseline_only: int
    """Cases that passed in the baseline and fail now."""
    candidate_only: int
    """Cases that failed in the baseline and pass now."""
    both_fail: int
    interval: list[float] | None
    """95% Newcombe paired interval of baseline − candidate pass rate."""
    mcnemar_p: float
    now_failing_cases: list[str] = []
    """The first `MAX_LISTED_FLIPS` ids of the `baseline_only` cases, in case order."""
    now_passing_cases: list[str] = []
    """The first `MAX_LISTED_FLIPS` ids of the `candidate_only` cases, in case order."""


class TrialsComparison(BaseModel):
    """Two runs, one of them (or both) with trials, compared case by case: the mean over shared
    scored cases of baseline − candidate pass fraction, with its paired SE (Miller 2024)."""

    cases: int
    """Cases scored in both runs (the pairs)."""
    mean_diff: float
    se: float
    interval: list[float]
    """95% interval, mean_diff ± 1.96·se clipped to [−1, 1]."""
    method: str = "paired differences of per-case pass fractions (Miller 2024)"


class TrajectoryFlips(BaseModel):
    """Cases whose trajectory checks all passed in one run and not in the other: counts, and
    the first `MAX_LISTED_FLIPS` ids of each, in case order."""

    compared: int
    """Cases with trajectory checks in both runs."""
    newly_failing: int
    newly_passing: int
    newly_failing_cases: list[str]
    newly_passing_cases: list[str]


class TurnDifference(BaseModel):
    """The turn-level pass rates of two runs over the turns both scored of the conversations
    both hold, and their paired difference baseline − candidate with the cluster-robust SE of
    Miller (2024) eq. 4, conversations as clusters (`assay.error_bars.paired_clustered_diff`)."""

    conversations: int
    """Conversations with a turn scored in both runs (the clusters)."""
    turns: int
    """Turns scored in both runs (the pairs)."""
    baseline_rate: float
    candidate_rate: float
    mean_diff: float
    se: float
    interval: list[float]
    """95% interval, mean_diff ± 1.96·se clipped to [−1, 1]."""
    method: str = "paired turn differences, conversations as clusters, Miller 2024 eq. 4"


class ConversationFlip(BaseModel):
    """A conversation whose verdict flipped, and its first turn that moved the same way (from
    pass to fail for a newly failing one, back for a newly passing one): ids and numbers only."""

    case_id: str
    turn: int | None
    """None when no turn moved that way (a conversation-level check or the policy's score
    flipped it)."""


class ConversationComparison(BaseModel):
    """Two runs' conversation cases compared: verdict flips with their first changed turn, and
    the paired, clustered difference of turn-level pass rates."""

    compared: int
    """Conversations with a verdict in both runs."""
    newly_failing: int
    newly_passing: int
    newly_failing_conversations: list[ConversationFlip]
    """The first `MAX_LISTED_FLIPS` of them, in case order."""
    newly_passing_conversations: list[ConversationFlip]
    turns: TurnDifference | None
    """None when no turn was scored in both runs."""


class CrossSuite(BaseModel):
    """A baseline of another suite, compared because the run asked for it (`cross_suite`)."""

    baseline_suite: str
    candidate_suite: str


class Comparison(BaseModel):
    """A run compared with its baseline; `--json` shape of `regression`."""

    baseline_run: str | None
    baseline_source: str | None = None
    status: RegressionStatus
    score_drop: float | None
    pass_rate_diff: float | None
    interval: list[float] | None
    """95% Newcombe hybrid score interval of baseline − candidate pass rate."""
    threshold: float
    baseline: Counts | None
    candidate: Counts
    paired: PairedAnalysis | None
    changed: list[str]
    trajectories: TrajectoryFlips | None = None
    """Cases whose trajectory verdict flipped; None when neither run has trajectory checks."""
    trials: TrialsComparison | None = None
    """The paired comparison over trials; when present it decides `regressed`."""
    minimum_detectable_drop: float | None = None
    """The smallest drop from the baseline's pass rate a two-sided 5% test detects with 80%
    power at these two runs' sizes (Cohen's h); None without a baseline."""
    conversations: ConversationComparison | None = Field(
        default=None, exclude_if=lambda conversations: conversations is None
    )
    """Conversation cases compared turn by turn; left out when neither run holds any (so a
    record without them keeps its bytes, and one written before reads as it was)."""
    cross_suite: CrossSuite | None = Field(
        default=None, exclude_if=lambda cross_suite: cross_suite is None
    )
    """The two suites when the baseline is a run of another suite; left out otherwise."""
    judge_corrected: CorrectedDifference | None = Field(
        default=None, exclude_if=lambda c: c is None
    )
    """The PPI++ paired difference from a calibration set (`--calibration`); when present its
    estimate and interval decide `status` and bound the drop. Left out when not asked for."""
    judge_corrected_warning: str | None = Field(default=None, exclude_if=lambda w: w is None)
    """Why a correction asked for is missing (never a silent fallback)."""
    decided_by: DecidedBy | None = Field(default=None, exclude_if=lambda d: d is None)
    """`intervals_used` as recorded (None without a baseline, and in records written before)."""

    @property
    def intervals_used(self) -> DecidedBy | None:
        """Which interval `status` rests on and which bounds the drop; None without one."""
        if self.baseline is None:
            return None
        if self.judge_corrected is not None:
            return DecidedBy(regressed="judge_corrected", non_inferiority="judge_corrected")
        if self.trials is not None:
            return DecidedBy(regressed="trials", non_inferiority="trials")
        paired = self.paired is not None and self.paired.interval is not None
        return DecidedBy(regressed="newcombe", non_inferiority="paired" if paired else "newcombe")

    def decided_on(self, rule: Literal["regressed", "non_inferiority"]) -> str:
        """Which interval `rule` read, in words (` (Newcombe)`); empty without a baseline."""
        return "" if (used := self.intervals_used) is None else f" ({used.named(rule)})"

    @property
    def deciding_interval(self) -> list[float] | None:
        """The interval `status` rests on: judge-corrected when there is one, else over
        trials when there are trials, else Newcombe's."""
        if self.judge_corrected is not None:
            return self.judge_corrected.interval
        return self.trials.interval if self.trials is not None else self.interval

    @property
    def drop_bound(self) -> float | None:
        """The upper 95% bound of the pass-rate drop: judge-corrected, else paired over
        trials, else paired over cases, else independent; None without a baseline."""
        if self.judge_corrected is not None:
            return self.judge_corrected.interval[1]
        if self.trials is not None:
            return self.trials.interval[1]
        if self.paired is not None and self.paired.interval is not None:
            return self.paired.interval[1]
        return None if self.interval is None else self.interval[1]

    @property
    def blind_to_threshold(self) -> bool:
        """No regression was found, but the runs are too small to see a drop the size of the
        threshold (the minimum detectable drop is larger)."""
        return (
            self.status is not RegressionStatus.REGRESSED
            and self.minimum_detectable_drop is not None
            and self.minimum_detectable_drop > self.threshold
        )


def trajectory_flips(baseline: RunSide, candidate: RunSide) -> TrajectoryFlips | None:
    """Which cases' trajectory verdicts flipped between the runs."""
    both = [case for case in candidate.trajectories if case in baseline.trajectories]
    if not both:
        return None
    failing = [c for c in both if baseline.trajectories[c] and not candidate.trajectories[c]]
    passing = [c for c in both if candidate.trajectories[c] and not baseline.trajectories[c]]
    return TrajectoryFlips(
        compared=len(both),
        newly_failing=len(failing),
        newly_passing=len(passing),
        newly_failing_cases=failing[:MAX_LISTED_FLIPS],
        newly_passing_cases=passing[:MAX_LISTED_FLIPS],
    )


@dataclass
class RunSide:
    """What the comparison needs to know about one run."""

    run_id: str
    passed: int
    scored: int
    score: float | None
    suite_version: int
    scorers: frozenset[str]
    """Keys of every scorer configuration the run's suite version used."""
    verdicts: Mapping[str, bool] = field(default_factory=dict)
    """Pass (True) or fail (False) of each scored case, by case id."""
    trajectories: Mapping[str, bool] = field(default_factory=dict)
    """Whether each case's trajectory checks all passed, for cases that have any."""
    fractions: Mapping[str, float] = field(default_factory=dict)
    """Each scored case's pass fraction over its scored trials (0 or 1 without trials)."""
    turns: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    """Each conversation case's turns, in order: the turn's pass fraction over its scored trials
    (1.0 or 0.0 without trials; a missing turn is scored, failed), None where none scored it."""
    with_trials: bool = False
    judge_model: str | None = None
    prompt_version: str | None = None
    suite: str | None = None


def _first_moved(
    before: tuple[float | None, ...], after: tuple[float | None, ...], down: bool
) -> int | None:
    """The number of the first turn scored in both runs whose pass fraction fell (`down`) or
    rose; None when none did."""
    for number, (was, now) in enumerate(zip(before, after, strict=False), start=1):
        if was is not None and now is not None and (now < was if down else now > was):
            return number
    return None


def _turn_difference(
    baseline: RunSide, candidate: RunSide, shared: list[str]
) -> TurnDifference | None:
    first: list[float] = []
    second: list[float] = []
    clusters: list[str] = []
    for case_id in shared:
        # Turn j pairs with turn j; a suite version with more turns pairs only the common ones.
        pairs = zip(baseline.turns[case_id], candidate.turns[case_id], strict=False)
        for was, now in pairs:
            if was is not None and now is not None:
                first.append(was)
                second.append(now)
                clusters.append(case_id)
    estimate = paired_clustered_diff(first, second, clusters)
    if estimate is None:
        return None
    return TurnDifference(
        conversations=len(set(clusters)),
        turns=len(first),
        baseline_rate=math.fsum(first) / len(first),
        candidate_rate=math.fsum(second) / len(second),
        mean_diff=estimate.mean,
        se=estimate.se,
        interval=[estimate.lo, estimate.hi],
    )


def conversation_comparison(baseline: RunSide, candidate: RunSide) -> ConversationComparison | None:
    """The conversations both runs hold, compared; None when they share none."""
    shared = [case_id for case_id in candidate.turns if case_id in baseline.turns]
    if not shared:
        return None
    judged = [c for c in shared if c in baseline.verdicts and c in candidate.verdicts]
    flips: dict[bool, list[ConversationFlip]] = {True: [], False: []}
    counts = {True: 0, False: 0}
    for case_id in judged:
        was, now = baseline.verdicts[case_id], candidate.verdicts[case_id]
        if was == now:
            continue
        counts[was] += 1  # was passing: now failing
        if len(flips[was]) < MAX_LISTED_FLIPS:
            turn = _first_moved(baseline.turns[case_id], candidate.turns[case_id], down=was)
            flips[was].append(ConversationFlip(case_id=case_id, turn=turn))
    return ConversationComparison(
        compared=len(judged),
        newly_failing=counts[True],
        newly_passing=counts[False],
        newly_failing_conversations=flips[True],
        newly_passing_conversations=flips[False],
        turns=_turn_difference(baseline, candidate, shared),
    )


def no_baseline(candidate: Counts, threshold: float) -> Comparison:
    """The comparison of a run that has nothing to compare with (only its counts are read)."""
    return Comparison(
        baseline_run=None,
        status=RegressionStatus.NO_BASELINE,
        score_drop=None,
        pass_rate_diff=None,
        interval=None,
        threshold=threshold,
        baseline=None,
        candidate=candidate,
        paired=None,
        changed=[],
    )


def _over_trials(baseline: RunSide, candidate: RunSide) -> TrialsComparison | None:
    if not (baseline.with_trials or candidate.with_trials):
        return None
    shared = [case for case in baseline.fractions if case in candidate.fractions]
    estimate = paired_mean_diff(
        [baseline.fractions[c] for c in shared], [candidate.fractions[c] for c in shared]
    )
    if estimate is None:
        return None
    return TrialsComparison(
        cases=len(shared),
        mean_diff=estimate.mean,
        se=estimate.se,
        interval=[estimate.lo, estimate.hi],
    )


def _paired(baseline: RunSide, candidate: RunSide) -> PairedAnalysis | None:
    if not baseline.verdicts or baseline.verdicts.keys() != candidate.verdicts.keys():
        return None
    cells = {"both_pass": 0, "baseline_only": 0, "candidate_only": 0, "both_fail": 0}
    flipped: dict[str, list[str]] = {"baseline_only": [], "candidate_only": []}
    for case_id, before in baseline.verdicts.items():
        after = candidate.verdicts[case_id]
        name = (
            ("both_pass" if after else "baseline_only")
            if before
            else ("candidate_only" if after else "both_fail")
        )
        cells[name] += 1
        listed = flipped.get(name)
        if listed is not None and len(listed) < MAX_LISTED_FLIPS:
            listed.append(case_id)
    interval = paired_diff(
        cells["both_pass"], cells["baseline_only"], cells["candidate_only"], cells["both_fail"]
    )
    return PairedAnalysis(
        **cells,
        interval=None if interval is None else [interval.lo, interval.hi],
        mcnemar_p=mcnemar_exact(cells["baseline_only"], cells["candidate_only"]),
        now_failing_cases=flipped["baseline_only"],
        now_passing_cases=flipped["candidate_only"],
    )


CaseChange = Literal["newly failing", "newly passing", "unchanged", "not compared"]


def case_change(before: bool | None, after: bool | None) -> CaseChange:
    """One case against the baseline: pass (True) or fail (False) in each run; None when the
    case was skipped or absent there, which compares nothing."""
    if before is None or after is None:
        return "not compared"
    if before == after:
        return "unchanged"
    return "newly passing" if after else "newly failing"


def what_changed(baseline: RunSide, candidate: RunSide) -> list[str]:
    """Human-readable differences between the runs' set-ups (not their results)."""
    changed = []
    if baseline.suite != candidate.suite:
        changed.append(
            f"suite: {baseline.suite}@{baseline.suite_version} → "
            f"{candidate.suite}@{candidate.suite_version}"
        )
    elif baseline.suite_version != candidate.suite_version:
        changed.append(f"suite_version: {baseline.suite_version} → {candidate.suite_version}")
    if baseline.scorers != candidate.scorers:
        added, removed = candidate.scorers - baseline.scorers, baseline.scorers - candidate.scorers
        changed.append(f"scorer_set: +{len(added)} −{len(removed)} configurations")
    if baseline.judge_model != candidate.judge_model:
        changed.append(f"judge_model: {baseline.judge_model} → {candidate.judge_model}")
    if baseline.prompt_version != candidate.prompt_version:
        changed.append(f"prompt_version: {baseline.prompt_version} → {candidate.prompt_version}")
    return changed


def compare(
    baseline: RunSide,
    candidate: RunSide,
    threshold: float,
    source: str | None = None,
    correction: DifferenceCorrection | None = None,
) -> Comparison:
    """Compare `candidate` with `baseline` under the rule above; a judge-corrected difference
    (`correction`), when there is one, decides in place of the interval over trials or cases."""
    score_drop = (
        None
        if baseline.score is None or candidate.score is None
        else baseline.score - candidate.score
    )
    rates = baseline.scored and candidate.scored
    pass_rate_diff = (
        baseline.passed / baseline.scored - candidate.passed / candidate.scored if rates else None
    )
    interval = newcombe_diff(baseline.passed, baseline.scored, candidate.passed, candidate.scored)
    trials = _over_trials(baseline, candidate)
    corrected = None if correction is None else correction.corrected
    paired_deciding = corrected or trials
    lower = paired_deciding.interval[0] if paired_deciding else interval.lo if interval else None
    drop = score_drop if corrected is None else corrected.estimate  # the judge's scores are biased
    if drop is None or lower is None or drop <= threshold:
        status = RegressionStatus.NO_REGRESSION
    elif lower > 0:
        status = RegressionStatus.REGRESSED
    else:
        status = RegressionStatus.INCONCLUSIVE_NOISE
    comparison = Comparison(
        baseline_run=baseline.run_id,
        baseline_source=source,
        status=status,
        score_drop=score_drop,
        pass_rate_diff=pass_rate_diff,
        interval=None if interval is None else [interval.lo, interval.hi],
        threshold=threshold,
        baseline=Counts(passed=baseline.passed, scored=baseline.scored),
        candidate=Counts(passed=candidate.passed, scored=candidate.scored),
        paired=_paired(baseline, candidate),
        changed=what_changed(baseline, candidate),
        trajectories=trajectory_flips(baseline, candidate),
        trials=trials,
        conversations=conversation_comparison(baseline, candidate),
        cross_suite=None
        if baseline.suite == candidate.suite or baseline.suite is None or candidate.suite is None
        else CrossSuite(baseline_suite=baseline.suite, candidate_suite=candidate.suite),
        minimum_detectable_drop=minimum_detectable_drop(
            baseline.passed / baseline.scored, baseline.scored, candidate.scored
        )
        if rates
        else None,
        judge_corrected=corrected,
        judge_corrected_warning=None if correction is None else correction.warning,
    )
    comparison.decided_by = comparison.intervals_used
    return comparison
