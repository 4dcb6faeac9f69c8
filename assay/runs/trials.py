"""Trials and clusters: a run's cases decided over their repeated trials, and the figures that
respect that trials of one case (or cases of one cluster) are not independent samples.

A run with trials scores and records every trial (evidence per trial, `CaseEvidence.trial`);
once every chunk is written, `settle_cases` groups the evidence by case, decides each case under
the suite's `TrialsPolicy` (`assay.runs.trial_rule.decide_trials`) and reports:

- `trials`: the pass rate over all trials with the cluster-robust SE of Miller (2024), eq. 4
  (cases are the clusters), the unbiased pass@k (Chen et al. 2021) and pass^k (τ-bench) for
  k = 1 … the fewest trials of a case (at most `MAX_REPORTED_K`), and the flaky cases (some
  trials passed, some not);
- `clustered`: when cases carry `cluster`, the case pass rate with the same estimator over the
  suite's clusters.

A conversation case's trials nest under it: the run's turn figures (`RunMetrics.turns`) count a
conversation's trials together, one cluster a conversation (`assay.runs.metrics.nested_turns`).

The formulas are in `assay.stats` and docs/EVAL-METHODOLOGY.md. The figures take time linear in
the trials: O(N) for the pass rate over N trials, O(min(k_min, MAX_REPORTED_K)) a distinct
(n, c) for pass@k and pass^k.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Final, NamedTuple

from pydantic import BaseModel

from assay.error_bars import clustered_mean
from assay.runs.metrics import RunMetrics, TurnTally, nested_turns, tally
from assay.runs.scoring import CaseEvidence
from assay.runs.trial_rule import decide_trials
from assay.scorers import Status
from assay.stats import pass_at_k, pass_pow_k
from assay.suites.suite import Suite, TrialsPolicy

FLAKY_LISTED: Final = 20
"""How many flaky case ids the figures name."""
MAX_REPORTED_K: Final = 100
"""The largest k pass@k and pass^k are reported for: they are a curve a person reads (every run
summary prints it, every report charts it with a label a point), and 10,000 trials a case would
make it 20,000 figures in each. k = 100 is the largest of Chen et al.'s pass@1, @10, @100."""
CLUSTER_ROBUST: Final = "cluster-robust SE (Miller 2024 eq. 4), cases as clusters"


class ClusteredRate(BaseModel):
    """A pass rate with its cluster-robust standard error and 95% interval."""

    rate: float
    se: float
    lo: float
    hi: float


class TrialRate(ClusteredRate):
    """The pass rate over every scored trial."""

    method: str = CLUSTER_ROBUST


class TrialFigures(BaseModel):
    """`EvalResult.trials`: what repeated trials say about a run."""

    cases: int
    """Cases with at least one scored trial (the figures' denominator)."""
    trials: int
    """Scored trials over those cases."""
    k_min: int
    k_max: int
    pass_rate: TrialRate
    pass_at_k: dict[str, float]
    """Mean over cases of 1 − C(n−c, k)/C(n, k), by k = 1 … min(k_min, `MAX_REPORTED_K`)."""
    pass_pow_k: dict[str, float]
    """Mean over cases of C(c, k)/C(n, k), by k = 1 … min(k_min, `MAX_REPORTED_K`)."""
    flaky_cases: int
    """Cases with 0 < c < n."""
    flaky: list[str]
    """The first `FLAKY_LISTED` of them, in case order."""


class Clustered(ClusteredRate):
    """`EvalResult.clustered`: the case pass rate with cases of one `cluster` not independent."""

    clusters: int


class SettledCases(BaseModel):
    """A run's case-level metrics and the figures that need all of its evidence at once."""

    metrics: RunMetrics
    trials: TrialFigures | None = None
    clustered: Clustered | None = None


def trial_counts(cases: Iterable[CaseEvidence]) -> dict[str, tuple[int, int]]:
    """(n scored trials, c passed) of each case with a scored trial, in first-seen order."""
    counts: dict[str, tuple[int, int]] = {}
    for case in cases:
        if case.status is Status.SKIPPED:
            continue
        n, c = counts.get(case.case_id, (0, 0))
        counts[case.case_id] = (n + 1, c + (case.status is Status.PASS))
    return counts


def trial_figures(counts: Mapping[str, tuple[int, int]]) -> TrialFigures | None:
    """The `trials` figures from each case's (n, c); None when no trial was scored."""
    if not counts:
        return None
    values: list[float] = []
    clusters: list[str] = []
    for case_id, (n, c) in counts.items():
        values.extend([1.0] * c + [0.0] * (n - c))
        clusters.extend([case_id] * n)
    estimate = clustered_mean(values, clusters)
    assert estimate is not None  # at least one trial
    k_min = min(n for n, _ in counts.values())
    top = min(k_min, MAX_REPORTED_K)
    at_k, pow_k = [0.0] * top, [0.0] * top
    for (n, c), cases in Counter(counts.values()).items():  # cases with one (n, c) agree
        for k, value in enumerate(pass_at_k(n, c, top)):
            at_k[k] += cases * value
        for k, value in enumerate(pass_pow_k(n, c, top)):
            pow_k[k] += cases * value
    flaky = [case_id for case_id, (n, c) in counts.items() if 0 < c < n]
    return TrialFigures(
        cases=len(counts),
        trials=len(values),
        k_min=k_min,
        k_max=max(n for n, _ in counts.values()),
        pass_rate=TrialRate(rate=estimate.mean, se=estimate.se, lo=estimate.lo, hi=estimate.hi),
        pass_at_k={str(k + 1): total / len(counts) for k, total in enumerate(at_k)},
        pass_pow_k={str(k + 1): total / len(counts) for k, total in enumerate(pow_k)},
        flaky_cases=len(flaky),
        flaky=flaky[:FLAKY_LISTED],
    )


def clustered_figure(cases: Iterable[CaseEvidence], suite: Suite) -> Clustered | None:
    """The case pass rate over scored cases with the suite's clusters (a case without one is
    its own); None when no case of the suite carries a cluster, or nothing was scored."""
    of = {case.id: case.cluster for case in suite.cases}
    if not any(of.values()):
        return None
    scored = [case for case in cases if case.status is not Status.SKIPPED]
    groups = [of.get(case.case_id) or f"case:{case.case_id}" for case in scored]
    estimate = clustered_mean([float(c.status is Status.PASS) for c in scored], groups)
    if estimate is None:
        return None
    return Clustered(
        rate=estimate.mean,
        se=estimate.se,
        lo=estimate.lo,
        hi=estimate.hi,
        clusters=len(set(groups)),
    )


class DecidedCases(NamedTuple):
    """A run's cases decided over their trials, each case's (n, c), and the conversations'
    turns with each conversation's trials together (None without a conversation case)."""

    cases: list[CaseEvidence]
    counts: dict[str, tuple[int, int]]
    turns: TurnTally | None


def decide_cases(evidence: Iterable[CaseEvidence], policy: TrialsPolicy) -> DecidedCases:
    """Each case decided over its trials (in first-seen order), each case's (n, c), and the
    turn tally that nests a conversation's trials under it (`nested_turns`)."""
    by_case: dict[str, list[CaseEvidence]] = {}
    for trial in evidence:
        by_case.setdefault(trial.case_id, []).append(trial)
    decided = [decide_trials(case_id, trials, policy) for case_id, trials in by_case.items()]
    counts = trial_counts(t for trials in by_case.values() for t in trials)
    return DecidedCases(decided, counts, nested_turns(by_case.values()))


_CASE_COUNTS: Final = (
    "cases",
    "scored",
    "passed",
    "failed",
    "skipped",
    "missing",
    "errors",
    "incomplete",
    "not_judged",
    "score_sum",
)


def case_metrics(decided: DecidedCases, per_trial: RunMetrics) -> RunMetrics:
    """Case-level counts of decided cases and their conversations' turns, each conversation's
    trials one cluster; the check-level and judge figures stay the trials' (every trial's
    checks were scored and paid for)."""
    cased = tally(decided.cases)
    metrics = per_trial.model_copy(deep=True)
    for name in _CASE_COUNTS:
        setattr(metrics, name, getattr(cased, name))
    metrics.turns = decided.turns
    return metrics


def settle_cases(
    read: Callable[[], Iterable[CaseEvidence]],
    policy: TrialsPolicy | None,
    metrics: RunMetrics,
    suite: Suite,
) -> SettledCases:
    """The run's case-level metrics and figures, from its written evidence (`read` streams it).

    A run without trials and without clusters is returned as it is, without reading anything.
    """
    clustered = any(case.cluster for case in suite.cases)
    if policy is None and not clustered:
        return SettledCases(metrics=metrics)
    if policy is None:
        return SettledCases(metrics=metrics, clustered=clustered_figure(read(), suite))
    decided = decide_cases(read(), policy)
    return SettledCases(
        metrics=case_metrics(decided, metrics),
        trials=trial_figures(decided.counts),
        clustered=clustered_figure(decided.cases, suite) if clustered else None,
    )
