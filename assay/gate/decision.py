"""The CI gate: one recorded verdict per run, from regression, pass rate, calibration and budget.

SPEC §10. A gate decision is derived from a finished run's EvalResult and the judge's calibration
status, and recorded write-once under `gates/<run_id>.json`. Rules, each reported whether it
passed or not:

- `regressed`: the run regressed against its baseline (Newcombe interval and score drop);
- `coverage`: fewer cases were fully scored than the suite's `min_coverage` asks (a case with a
  check the configured judge could not score is incomplete and counts against it; cases left out
  for want of any judge are outside the denominator), or nothing was scored at all;
- `pass_rate_below_threshold`: the pass rate of the scored cases is below the suite's pass
  threshold, or nothing was scored at all (fail closed: an empty denominator never passes);
- `judge_uncalibrated`: the suite uses `llm_judge`, a judge was configured, and that judge
  (model pin, prompt version) has no passing calibration report;
- `judge_not_admitted`: the suite uses `llm_judge`, a calibrated judge was configured, and its
  latest admission record for this battery version (`assay judge admit`, docs/admission.md) is
  missing or refused: its verdicts are reported, never a passing gate (an uncalibrated judge is
  `judge_uncalibrated`'s);
- `judge_unavailable`: a judge was configured but some `llm_judge` checks went unjudged (the
  endpoint failed past its retries, or replied malformed) — an outage is not a pass;
- `budget_blocked`: a FinOps budget stopped or refused judge spending;
- `judge_flip_rate` (only with `--max-judge-flip-rate X`): the share of checks whose repeated
  verdicts disagreed is above X, or was not measured (no `--judge-repeats` ≥ 2);
- `insufficient_evidence` (only when the suite sets `non_inferiority_margin` δ): the upper bound
  of the 95% interval of the pass-rate drop against the baseline (paired when the cases are
  shared) is not below δ, or there is no baseline. "No significant drop" is not evidence of no
  drop: this rule asks for evidence that any drop is smaller than δ. When it is the only rule
  that failed, the verdict is `insufficient_evidence`, not `fail` (CI exits 1 unless
  `--allow-insufficient`).

A *what-if* decision (`what_if`) applies the same rules to a recorded run with other thresholds;
it calls no judge and records nothing.

Judged checks that were skipped for want of a judge or credentials do not fail the gate; they are
a declared warning that lists the unjudged cases — never a silent pass. The *recorded* verdict
never changes; a governed override (`assay.gate.overrides`) changes only the effective verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import BaseModel

from assay.admission.figures import judge_admission
from assay.admission.record import AdmissionState
from assay.calibration.report import is_calibrated
from assay.errors import NotFoundError
from assay.judge.port import JudgePin
from assay.regression import RegressionStatus
from assay.runs.chunks import read_cases
from assay.runs.metrics import run_verdict
from assay.runs.records import EvalResult, load_result, resolve_run_id
from assay.runs.render import warnings
from assay.scorers import Status
from assay.scorers.judge import LlmJudgeConfig
from assay.store import EvidenceStore
from assay.store.write_once import write_once
from assay.suites import registry
from assay.suites.suite import Suite

GateVerdict = Literal["pass", "fail", "insufficient_evidence"]

REGRESSED: Final = "regressed"
COVERAGE: Final = "coverage"
PASS_RATE: Final = "pass_rate_below_threshold"
UNCALIBRATED: Final = "judge_uncalibrated"
NOT_ADMITTED: Final = "judge_not_admitted"
UNAVAILABLE: Final = "judge_unavailable"
BUDGET_BLOCKED: Final = "budget_blocked"
FLIP_RATE: Final = "judge_flip_rate"
INSUFFICIENT: Final = "insufficient_evidence"
RULES: Final = (
    REGRESSED,
    COVERAGE,
    PASS_RATE,
    UNCALIBRATED,
    NOT_ADMITTED,
    UNAVAILABLE,
    BUDGET_BLOCKED,
    FLIP_RATE,
    INSUFFICIENT,
)
"""Every gate rule, in the order they are reported (`judge_flip_rate` only when a limit is set:
`--max-judge-flip-rate`; `insufficient_evidence` only with a `non_inferiority_margin`)."""

UNJUDGED_SHOWN: Final = 20
"""How many unjudged case ids a warning names before it says `… and N more`."""


class RuleResult(BaseModel):
    """One gate rule's outcome for one run."""

    rule: str
    passed: bool
    detail: str


class GateReason(BaseModel):
    """Why the gate failed: the rule and a one-line explanation with the numbers."""

    rule: str
    message: str


class GateDecision(BaseModel):
    """The recorded gate verdict of one run (write-once).

    Attributes:
        run_id: The suite run the gate judged (its Prefect flow run id).
        verdict: The recorded verdict; overrides never change it.
        reasons: Every failed rule, in rule order; empty when the verdict is `pass`.
        warnings: Declared warnings (unjudged cases, missing outputs, …).
        rules: Every rule's result, passed or not (one JUnit test case each).
        unjudged_cases: Case ids whose `llm_judge` checks were skipped.
        judge: The judge the run used, if any.
        calibrated: Whether that judge was calibrated; None when no judge was involved.
        admission: That judge's admission state; None when no judge was involved.
        decided_at: When the gate decided (UTC).
        what_if: True for a what-if decision (other thresholds, never recorded).
    """

    run_id: str
    suite: str
    suite_version: int
    subject: str
    verdict: GateVerdict
    reasons: list[GateReason]
    warnings: list[str]
    rules: list[RuleResult]
    unjudged_cases: list[str]
    judge: JudgePin | None
    calibrated: bool | None
    decided_at: datetime
    what_if: bool = False
    admission: AdmissionState | None = None


def _key(run_id: str) -> str:
    return f"gates/{run_id}.json"


def _rule_results(
    result: EvalResult,
    uses_judge: bool,
    calibrated: bool | None,
    unjudged: list[str],
    admission: AdmissionState | None,
) -> list[RuleResult]:
    regression = result.regression
    regressed = regression is not None and regression.status is RegressionStatus.REGRESSED
    if regression is None or regression.status is RegressionStatus.NO_BASELINE:
        regression_detail = "no baseline: nothing to compare with yet"
    elif (
        regressed
        and regression.baseline is not None
        and (deciding := regression.deciding_interval) is not None
    ):
        lo, hi = deciding
        regression_detail = (
            f"regressed vs {regression.baseline_run}: pass "
            f"{regression.baseline.passed}/{regression.baseline.scored} → "
            f"{regression.candidate.passed}/{regression.candidate.scored}, "
            f"drop 95% CI {lo:.3f} to {hi:.3f}" + regression.decided_on(REGRESSED)
        )
    else:
        regression_detail = f"{regression.status.value} vs baseline {regression.baseline_run}"
        regression_detail += regression.decided_on(REGRESSED)

    m = result.metrics
    rate = "n/a" if result.pass_rate is None else f"{result.pass_rate:.3f}"
    pass_rate_ok = result.pass_rate is not None and result.pass_rate >= result.pass_threshold
    pass_detail = (
        f"pass rate {rate} ({m.passed}/{m.scored}) vs threshold {result.pass_threshold:.2f}"
        + ("" if m.scored else "; nothing was scored")
    )
    coverage = m.coverage
    coverage_ok = coverage is not None and coverage >= result.min_coverage
    coverage_detail = (
        f"coverage {'n/a' if coverage is None else f'{coverage:.3f}'} "
        f"({m.coverage_text()}) vs minimum {result.min_coverage:g}"
        + (f"; {m.incomplete} case(s) incomplete (a check not scored)" if m.incomplete else "")
    )

    if not uses_judge:
        judge_ok, judge_detail = True, "the suite has no llm_judge checks"
    elif result.judge is None:
        judge_ok, judge_detail = True, "no judge configured (see warnings)"
    elif calibrated:
        judge_ok = True
        judge_detail = f"{result.judge.model} · {result.judge.prompt_version} is calibrated"
    else:
        judge_ok = False
        judge_detail = (
            f"{result.judge.model} · {result.judge.prompt_version} has no passing "
            "calibration report (run `assay calibrate`)"
        )

    budget = result.budget
    budget_ok = budget is None or budget.allowed
    budget_detail = (
        "judge spending was within budget"
        if budget is None
        else f"{budget.status}: {budget.reason}"
    )

    # Checks skipped for an even split of repeated verdicts are counted in judge_consistency;
    # they are not an outage.
    split = result.metrics.split_checks
    judged = result.judge is not None and budget_ok
    outage = judged and bool(unjudged) and result.metrics.skipped_checks > split
    if outage:
        available_detail = (
            f"{len(unjudged)} case(s) with llm_judge checks the configured judge did not judge "
            f"(endpoint errors past retries or malformed replies): {_named(unjudged)}"
        )
    elif result.judge is None:
        available_detail = "no judge configured (see warnings)" if unjudged else "no judge needed"
    else:
        available_detail = "every llm_judge check was judged" if budget_ok else "see budget_blocked"
        if split and budget_ok:
            available_detail = f"every llm_judge check was judged ({split} split, skipped)"
    return [
        RuleResult(rule=REGRESSED, passed=not regressed, detail=regression_detail),
        RuleResult(rule=COVERAGE, passed=coverage_ok, detail=coverage_detail),
        RuleResult(rule=PASS_RATE, passed=pass_rate_ok, detail=pass_detail),
        RuleResult(rule=UNCALIBRATED, passed=judge_ok, detail=judge_detail),
        _admission_rule(result, uses_judge, calibrated, admission),
        RuleResult(rule=UNAVAILABLE, passed=not outage, detail=available_detail),
        RuleResult(rule=BUDGET_BLOCKED, passed=budget_ok, detail=budget_detail),
    ]


def _admission_rule(
    result: EvalResult, uses_judge: bool, calibrated: bool | None, admission: AdmissionState | None
) -> RuleResult:
    """`judge_not_admitted`: a judge's verdicts gate only once it was admitted."""
    if not uses_judge or result.judge is None:
        return RuleResult(rule=NOT_ADMITTED, passed=True, detail="no judge to admit")
    if not calibrated:
        return RuleResult(
            rule=NOT_ADMITTED, passed=True, detail="see judge_uncalibrated (admission needs it)"
        )
    judge = f"{result.judge.model} · {result.judge.prompt_version}"
    if admission is None or not admission.admitted:
        summary = "never admitted" if admission is None else admission.summary
        return RuleResult(
            rule=NOT_ADMITTED,
            passed=False,
            detail=f"{judge} is {summary}; its verdicts are reported, not gating",
        )
    return RuleResult(rule=NOT_ADMITTED, passed=True, detail=f"{judge} is {admission.summary}")


def unjudged_cases(store: EvidenceStore, result: EvalResult) -> list[str]:
    """Case ids of the run whose `llm_judge` checks were skipped (from per-case evidence; a
    case with several such trials is named once)."""
    if not result.metrics.skipped_checks:
        return []
    unjudged = (
        case.case_id
        for case in read_cases(store, result.run_id)
        if any(
            check.status is Status.SKIPPED and check.scorer.startswith("llm_judge")
            for check in case.checks
        )
    )
    return list(dict.fromkeys(unjudged))


def _named(case_ids: Iterable[str]) -> str:
    ids = list(case_ids)
    shown = ", ".join(ids[:UNJUDGED_SHOWN])
    more = len(ids) - UNJUDGED_SHOWN
    return shown + (f" … and {more} more" if more > 0 else "")


def flip_rate_rule(result: EvalResult, limit: float) -> RuleResult:
    """`judge_flip_rate`: the judge's flip rate over repeated verdicts is at most `limit`.

    Fails closed: a run whose checks were not judged more than once has no flip rate, and a
    limit that cannot be checked is not met.
    """
    consistency = result.judge_consistency
    if consistency is None or consistency.flip_rate.rate is None:
        return RuleResult(
            rule=FLIP_RATE,
            passed=False,
            detail=f"no flip rate measured (limit {limit:.3f}): judge with --judge-repeats 2 or "
            "more",
        )
    flips = consistency.flip_rate
    assert flips.rate is not None and flips.lo is not None and flips.hi is not None
    flipped = consistency.checks - consistency.unanimous
    passed = flips.rate <= limit
    return RuleResult(
        rule=FLIP_RATE,
        passed=passed,
        detail=f"flip rate {flips.rate:.3f} ({flipped}/{consistency.checks}, 95% CI "
        f"{flips.lo:.3f}–{flips.hi:.3f}) {'within' if passed else 'above'} the limit {limit:.3f}",
    )


def non_inferiority_rule(result: EvalResult, margin: float) -> RuleResult:
    """`insufficient_evidence`: passed when the upper 95% bound of the pass-rate drop against the
    baseline is below `margin` (δ); fails closed without a baseline."""
    regression = result.regression
    bound = None if regression is None else regression.drop_bound
    if regression is None or bound is None:
        return RuleResult(
            rule=INSUFFICIENT,
            passed=False,
            detail=f"no baseline to show a drop below the margin {margin:g}",
        )
    passed = bound < margin
    return RuleResult(
        rule=INSUFFICIENT,
        passed=passed,
        detail=f"upper 95% bound of the drop vs {regression.baseline_run} {bound:.4f} "
        f"{'below' if passed else 'not below'} the non-inferiority margin {margin:g}"
        + regression.decided_on("non_inferiority"),
    )


def decide(
    result: EvalResult,
    *,
    uses_judge: bool,
    calibrated: bool | None,
    unjudged: list[str],
    run_warnings: list[str],
    now: datetime | None = None,
    max_judge_flip_rate: float | None = None,
    non_inferiority_margin: float | None = None,
    admission: AdmissionState | None = None,
) -> GateDecision:
    """Apply every gate rule to a finished run.

    Args:
        result: The run's EvalResult.
        uses_judge: Whether the suite has `llm_judge` checks.
        calibrated: Whether the run's judge is calibrated (None when no judge was used).
        unjudged: Case ids whose judge checks were skipped (`unjudged_cases`).
        run_warnings: The run's declared warnings (`assay.runs.render.warnings`).
        now: The decision time (default: now, UTC).
        max_judge_flip_rate: When set, the `judge_flip_rate` rule is applied too.
        non_inferiority_margin: When set, the `insufficient_evidence` rule is applied too.
        admission: The run's judge's admission state (None: no judge, or never admitted).
    """
    rules = _rule_results(result, uses_judge, calibrated, unjudged, admission)
    if max_judge_flip_rate is not None:
        rules.append(flip_rate_rule(result, max_judge_flip_rate))
    if non_inferiority_margin is not None:
        rules.append(non_inferiority_rule(result, non_inferiority_margin))
    reasons = [GateReason(rule=r.rule, message=r.detail) for r in rules if not r.passed]
    verdict: GateVerdict = "pass"
    if any(reason.rule != INSUFFICIENT for reason in reasons):
        verdict = "fail"
    elif reasons:
        verdict = INSUFFICIENT
    notes = list(run_warnings)
    if unjudged and result.judge is None:
        notes.append(
            f"{len(unjudged)} case(s) not judged (no judge or no credentials): {_named(unjudged)}"
        )
    return GateDecision(
        run_id=result.run_id,
        suite=result.suite,
        suite_version=result.suite_version,
        subject=result.subject,
        verdict=verdict,
        reasons=reasons,
        warnings=notes,
        rules=rules,
        unjudged_cases=unjudged,
        judge=result.judge,
        calibrated=calibrated if result.judge is not None else None,
        decided_at=now or datetime.now(UTC),
        admission=admission if result.judge is not None else None,
    )


def assess(
    store: EvidenceStore,
    result: EvalResult,
    suite: Suite,
    max_judge_flip_rate: float | None = None,
) -> GateDecision:
    """Apply every gate rule to a recorded run, reading what the rules need from the store (the
    judge's calibration, the unjudged cases); records nothing and calls no judge."""
    judge = None if result.judge is None else JudgePin(**result.judge.model_dump())
    calibrated = None if judge is None else is_calibrated(store, judge)
    admission = None if judge is None else judge_admission(store, judge)
    return decide(
        result,
        uses_judge=uses_judge(suite),
        calibrated=calibrated,
        unjudged=unjudged_cases(store, result),
        run_warnings=warnings(result),
        max_judge_flip_rate=max_judge_flip_rate,
        non_inferiority_margin=suite.non_inferiority_margin,
        admission=admission,
    )


def what_if(
    store: EvidenceStore,
    run_id: str,
    pass_threshold: float,
    min_coverage: float | None = None,
    max_judge_flip_rate: float | None = None,
) -> GateDecision:
    """The gate decision a recorded run would get with other thresholds, from its stored
    verdicts: no judge call, nothing written, the recorded decision untouched.

    Raises:
        NotFoundError: No such run, or it has no EvalResult.
    """
    recorded = load_result(store, resolve_run_id(store, run_id))
    _, suite = registry.resolve(store, f"{recorded.suite}@{recorded.suite_version}")
    metrics = recorded.metrics
    coverage = recorded.min_coverage if min_coverage is None else min_coverage
    passed, reason = run_verdict(metrics, pass_threshold, coverage)
    changed = recorded.model_copy(
        update={
            "pass_threshold": pass_threshold,
            "min_coverage": coverage,
            "passed": passed,
            "verdict_reason": reason,
        }
    )
    decision = assess(store, changed, suite, max_judge_flip_rate)
    return decision.model_copy(update={"what_if": True})


def record_decision(store: EvidenceStore, decision: GateDecision) -> GateDecision:
    """Record a decision write-once; a run already decided keeps its first decision."""
    return write_once(store, _key(decision.run_id), decision)


def load_decision(store: EvidenceStore, run_id: str) -> GateDecision:
    """The recorded gate decision of a run; NotFoundError when the gate never decided it."""
    try:
        return GateDecision.model_validate_json(store.get(_key(run_id)))
    except NotFoundError:
        raise NotFoundError(f"no gate decision for run {run_id} in {store.uri}") from None


class GateRun(BaseModel):
    """What the gate flow returns: the recorded decision and the run it decided."""

    decision: GateDecision
    result: EvalResult


class GateReport(BaseModel):
    """A gate run as callers read it: `assay gate --json` prints it and `POST /gate` returns it.

    `effective_verdict` is the recorded verdict at decision time; overrides granted later show
    in `assay gate --check` and `GET /gates/{run_id}`.
    """

    verdict: GateVerdict
    reasons: list[GateReason]
    warnings: list[str]
    run_id: str
    effective_verdict: GateVerdict
    rules: list[RuleResult]
    unjudged_cases: list[str]
    result: EvalResult
    admission: AdmissionState | None = None
    report_link_key: str | None = None
    """The key the report link of the pull-request comment carries (`assay.reports.link_key`,
    docs/ci.md); None from a service that predates it."""

    @classmethod
    def of(cls, run: GateRun, link_key: str) -> GateReport:
        """The report of a gate run; `link_key` is its run's report link key."""
        decision = run.decision
        recorded = {name: getattr(decision, name) for name in _RECORDED_IN_REPORT}
        recorded["report_link_key"] = link_key
        return cls(**recorded, effective_verdict=decision.verdict, result=run.result)


_RECORDED_IN_REPORT: Final = GateReport.model_fields.keys() & GateDecision.model_fields.keys()
"""The fields a gate report copies from its recorded decision."""


def uses_judge(suite: Suite) -> bool:
    """Whether any case of the suite is graded by `llm_judge`."""
    return any(
        isinstance(spec.config, LlmJudgeConfig)
        for case in suite.cases
        for spec in suite.scorers_for(case)
    )
