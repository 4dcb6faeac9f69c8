"""How far a run's judged numbers can be trusted: the PPI++-corrected pass rate of its
`llm_judge` checks, and (with repeats) how often the judge contradicts itself.

- **Judge-corrected pass rate** (computed by `assay.calibration.correction`, which reads the
  reports). With a calibration set whose report was measured for the run's
  very judge (model pin and prompt version, redaction settings included), the run's judge
  verdicts are the unlabelled sample and the report's per-item (human label, judge verdict)
  pairs the labelled one: `assay.ppi.ppi_mean` gives the pass rate people would have given,
  with its 95% interval, beside the naive judge pass rate. Assumption: the calibration items are
  a random sample of the same kind of cases. A set measured for another judge, or too small
  (fewer judged items than `assay.calibration.report.MIN_JUDGED`), gives no correction and a warning
  saying why — never a silent fallback to the naive rate.
- **Judge self-consistency** (`JudgeConsistency`): each check judged K times; the flip rate is
  the share of checks whose K verdicts were not all equal, with its Wilson interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.judge.agreement import JuryAgreement, JuryTally
from assay.judge.port import JUDGE_SPLIT, Verdict
from assay.rate import Rate

METHOD: Final = "ppi++"


class JudgeCorrected(BaseModel):
    """The PPI++ estimate of a run's judged pass rate (`"judge_corrected"` in the EvalResult).

    Attributes:
        method: Always `ppi++`.
        estimate: The pass rate people would have given, estimated.
        interval: Its 95% interval (normal, clipped to [0, 1]).
        labelled: n, calibration items with a human label and a judge verdict.
        unlabelled: N, the run's judged `llm_judge` checks.
        lambda_: The power-tuning weight (`"lambda"` in JSON), in [0, 1].
        naive: The judge's own pass rate over the run's checks.
        calibration_report: The report the labelled pairs came from.
    """

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True)

    method: Literal["ppi++"] = METHOD
    estimate: float
    interval: tuple[float, float]
    labelled: int
    unlabelled: int
    lambda_: float = Field(alias="lambda", ge=0.0, le=1.0)
    naive: float
    calibration_report: str


class JudgeConsistency(BaseModel):
    """How often the judge contradicted itself over K repeats (`"judge_consistency"`).

    Attributes:
        repeats: K, verdicts asked per check.
        checks: Checks with K pass/fail verdicts (the flip rate's denominator).
        unanimous: Checks whose K verdicts were all equal.
        split: Checks whose verdicts tied (K even): skipped with `judge split`, never passed.
        flip_rate: (checks − unanimous) / checks with its Wilson 95% interval.
    """

    repeats: int
    checks: int
    unanimous: int
    split: int
    flip_rate: Rate


def majority(repeats: Sequence[Verdict]) -> tuple[Verdict, bool | None]:
    """A check's verdict from its K repeated verdicts, and whether they agreed.

    Fail closed: any skipped repeat (an outage, a budget stop) makes the check skipped with that
    reason; an even split is skipped with `judge split` — never a pass. The majority's score is
    the mean of the majority's scores.

    Returns:
        The verdict, and True (unanimous) / False (they differed) / None (not all judged).
    """
    skipped = next((verdict for verdict in repeats if verdict.status == "skipped"), None)
    if skipped is not None:
        return skipped, None
    passes = [verdict for verdict in repeats if verdict.status == "pass"]
    fails = [verdict for verdict in repeats if verdict.status == "fail"]
    unanimous = not passes or not fails
    if len(passes) == len(fails):
        first = repeats[0]
        split = Verdict.skipped(JUDGE_SPLIT, model=first.model, prompt_version=first.prompt_version)
        return split, False
    winners = passes if len(passes) > len(fails) else fails
    score = sum(verdict.score for verdict in winners) / len(winners)
    return winners[0].model_copy(update={"score": score}), unanimous


def consistency(repeats: int, checks: int, unanimous: int, split: int) -> JudgeConsistency:
    """The run's self-consistency figures from its counts (flip rate with its Wilson interval)."""
    return JudgeConsistency(
        repeats=repeats,
        checks=checks,
        unanimous=unanimous,
        split=split,
        flip_rate=Rate.of(checks - unanimous, checks),
    )


class JudgeReliability(BaseModel):
    """What a run reports about its judge's trustworthiness (EvalResult fields, no text)."""

    judge_corrected: JudgeCorrected | None = None
    judge_consistency: JudgeConsistency | None = None
    judge_redactions: dict[str, int] | None = None
    """Redactions per kind in what this run's judge prompts held (None: no judge)."""
    judge_jury: JuryAgreement | None = None
    """A jury's agreement over every check this run judged (None: a single judge)."""
    judge_warnings: list[str] = Field(default_factory=list)
    """Why a correction or a figure is missing (never a silent fallback)."""


def run_reliability(
    *,
    repeats: int,
    repeated: int,
    unanimous: int,
    split: int,
    redactions: dict[str, int] | None,
    correction: Correction | None,
    jury: JuryTally | None = None,
) -> JudgeReliability:
    """A run's judge figures: consistency when checks were judged more than once, redaction
    counts, a jury's agreement, and the PPI++ correction (or the warning saying why there is
    none)."""
    return JudgeReliability(
        judge_consistency=consistency(repeats, repeated, unanimous, split) if repeats > 1 else None,
        judge_redactions=redactions,
        judge_jury=jury.agreement() if jury is not None else None,
        judge_corrected=correction.corrected if correction else None,
        judge_warnings=[correction.warning] if correction and correction.warning else [],
    )


class Correction(BaseModel):
    """A correction, or why there is none (exactly one of the two is set)."""

    corrected: JudgeCorrected | None = None
    warning: str | None = None


def judge_lines(reliability: JudgeReliability) -> list[str]:
    """The judge figures in words for summaries and the CLI (figures and counts only)."""
    lines = []
    corrected = reliability.judge_corrected
    if corrected is not None:
        lo, hi = corrected.interval
        lines.append(
            f"judge-corrected pass rate (PPI++) {corrected.estimate:.3f} "
            f"(95% CI {lo:.3f}–{hi:.3f}; {corrected.labelled} labelled, "
            f"{corrected.unlabelled} judged, λ {corrected.lambda_:.2f}) vs naive judge pass "
            f"rate {corrected.naive:.3f}"
        )
    consistency = reliability.judge_consistency
    if consistency is not None:
        flips = consistency.flip_rate
        rate = (
            "n/a"
            if flips.rate is None
            else f"{flips.rate:.3f} (95% CI {flips.lo:.3f}–{flips.hi:.3f})"
        )
        lines.append(
            f"judge self-consistency over {consistency.repeats} repeats: "
            f"{consistency.checks - consistency.unanimous}/{consistency.checks} checks flipped, "
            f"flip rate {rate}; {consistency.split} split (skipped)"
        )
    if reliability.judge_jury is not None:
        lines.append(jury_line(reliability.judge_jury, consistency))
    redactions = reliability.judge_redactions
    if redactions is not None:
        counted = ", ".join(f"{kind} {n}" for kind, n in redactions.items()) or "none"
        lines.append(f"redacted before judging: {counted}")
    return lines


def jury_line(jury: JuryAgreement, consistency: JudgeConsistency | None = None) -> str:
    """`jury: majority of 3 — alpha 0.73 (n=240 checks), effective votes 1.2`: over a run's
    judged checks, each repeat its own item when checks were judged K > 1 times."""
    alpha = "undefined" if jury.alpha_verdicts is None else f"{jury.alpha_verdicts:.2f}"
    votes = "undefined" if jury.effective_votes is None else f"{jury.effective_votes:.1f}"
    items = "checks" if consistency is None else f"verdicts: checks × {consistency.repeats}"
    return (
        f"jury: {jury.aggregation} of {jury.jurors} — alpha {alpha} (n={jury.items} {items}), "
        f"effective votes {votes}"
    )
