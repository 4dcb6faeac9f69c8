"""The judge-corrected paired difference a comparison reports, and which interval decided.

Records only: the estimator is `assay.ppi.ppi_paired_difference`, the labels are matched to
the two runs' cases by `assay.runs.judge_corrected`, and `assay.regression.compare` lets the
corrected interval decide when it exists (docs/EVAL-METHODOLOGY.md, "Judge-corrected paired
differences").
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

IntervalName = Literal["judge_corrected", "trials", "paired", "newcombe"]
"""An interval of a comparison: the PPI++ paired one, the paired one over trials, Newcombe's
paired one over the shared cases, Newcombe's hybrid score interval of two independent rates."""

_SHORT: Final[dict[IntervalName, str]] = {
    "judge_corrected": "judge-corrected, PPI++ paired",
    "trials": "paired over trials",
    "paired": "paired over cases",
    "newcombe": "Newcombe",
}


class DecidedBy(BaseModel):
    """Which interval each rule read: `regressed` its lower bound, the non-inferiority rule
    (`insufficient_evidence`) its upper bound."""

    regressed: IntervalName
    non_inferiority: IntervalName

    def named(self, rule: Literal["regressed", "non_inferiority"]) -> str:
        """`judge-corrected, PPI++ paired` and the like: the interval `rule` read."""
        return _SHORT[getattr(self, rule)]


class CorrectedDifference(BaseModel):
    """The PPI++ estimate of the paired pass-rate difference baseline − candidate over the
    shared cases, human labels correcting both runs' verdicts (`"judge_corrected"`).

    Attributes:
        method: Always `ppi++ paired`.
        estimate: The difference people's verdicts would show, estimated.
        interval: Its 95% interval (normal, clipped to [−1, 1]).
        judge_diff: The raw difference of the runs' own verdicts over the same shared cases.
        judge_interval: Its 95% paired interval (the same normal form, no labels).
        labelled: n, shared cases whose output in each run has people's labels.
        unlabelled: N, the other shared cases.
        lambda_: The power-tuning weight (`"lambda"` in JSON), in [0, 1].
        labelled_one_side: Cases labelled in one run only (not used: a difference needs both).
    """

    model_config = ConfigDict(serialize_by_alias=True, validate_by_name=True)

    method: Literal["ppi++ paired"] = "ppi++ paired"
    estimate: float
    interval: list[float]
    judge_diff: float
    judge_interval: list[float]
    labelled: int
    unlabelled: int
    lambda_: float = Field(alias="lambda", ge=0.0, le=1.0)
    labelled_one_side: int = 0


class DifferenceCorrection(BaseModel):
    """A corrected difference, or why there is none (exactly one of the two is set)."""

    corrected: CorrectedDifference | None = None
    warning: str | None = None


def corrected_lines(
    corrected: CorrectedDifference | None, warning: str | None, used: DecidedBy | None
) -> list[str]:
    """The judge-corrected difference beside the judge's own, and which interval each rule
    read, in words (figures and counts only)."""
    lines = [] if warning is None else [warning]
    if corrected is not None:
        lo, hi = corrected.interval
        judge_lo, judge_hi = corrected.judge_interval
        lines.append(
            f"judge-corrected drop (PPI++ paired, human labels) {corrected.estimate:+.3f}, "
            f"95% CI {lo:+.3f} to {hi:+.3f} ({corrected.labelled} labelled case pair(s), "
            f"{corrected.unlabelled} unlabelled, λ {corrected.lambda_:.2f}) vs the judge's own "
            f"{corrected.judge_diff:+.3f}, 95% CI {judge_lo:+.3f} to {judge_hi:+.3f}"
        )
    if used is not None:
        lines.append(
            f"intervals used (decided_by): regressed ← {used.named('regressed')}; "
            f"non-inferiority bound ← {used.named('non_inferiority')}"
        )
    return lines
