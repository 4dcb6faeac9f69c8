"""A subject's outcome: dimension means with coverage, the composite, its band and action.

OS = Σ wᵢ · mean(Qᵢ), each mean over the records where that dimension is available (seed 000
§3.2). A weighted dimension unavailable for the whole subject makes the composite `incomplete`
(no value, no band), unless the contract allows partial composites: then the weights present
are renormalised and the composite is `partial`. An unavailable dimension is never a zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from assay.findings import Finding
from assay.outcome.contract import (
    ACTIONS,
    DIMENSIONS,
    WEIGHT_SUM_TOLERANCE,
    Band,
    Contract,
    Dimension,
)

CompositeStatus = Literal["complete", "partial", "incomplete"]


class DimensionScore(BaseModel):
    """A dimension's mean over the `n` records where it is available (None when n is 0)."""

    model_config = ConfigDict(frozen=True)

    mean: float | None = Field(ge=0.0, le=1.0)
    n: int = Field(ge=0)

    @classmethod
    def of(cls, values: Sequence[float]) -> DimensionScore:
        """The mean of the available values (no values: unavailable, never 0)."""
        return cls(mean=math.fsum(values) / len(values) if values else None, n=len(values))


class Composite(BaseModel):
    """The composite score: `value` is None exactly when `status` is `incomplete`."""

    model_config = ConfigDict(frozen=True)

    value: float | None = Field(ge=0.0, le=1.0)
    status: CompositeStatus
    missing: list[Dimension]
    """Weighted dimensions unavailable for the whole subject."""


class SubjectOutcome(BaseModel):
    """One subject's outcome score: the `--json` shape of `assay outcome`, per subject."""

    model_config = ConfigDict(frozen=True)

    subject: str
    invocations: int
    dimensions: dict[Dimension, DimensionScore]
    composite: Composite
    band: Band | None
    """None when the composite is incomplete: no band is claimed without a score."""
    action: str | None


def composite(dimensions: Mapping[Dimension, DimensionScore], contract: Contract) -> Composite:
    """Σ wᵢ · mean(Qᵢ) over the weighted dimensions, or why it cannot be given.

    Dimensions with weight 0 never count, available or not. With `allow_partial`, the present
    weighted dimensions are renormalised to sum to 1 — provided their weights add up to at least
    `partial_min_weight`: a band (and its governance action) never rests on a sliver of the
    contract, e.g. safety and efficiency alone. Otherwise the composite is `incomplete`.
    """
    weighted = [d for d in DIMENSIONS if contract.weights[d] > 0]
    missing = [d for d in weighted if dimensions[d].mean is None]
    present = [d for d in weighted if d not in missing]
    weight = math.fsum(contract.weights[d] for d in present)
    enough = weight + WEIGHT_SUM_TOLERANCE >= contract.partial_min_weight
    if missing and (not contract.allow_partial or not present or not enough):
        return Composite(value=None, status="incomplete", missing=missing)
    total = math.fsum(contract.weights[d] * _mean(dimensions[d]) for d in present)
    value = min(max(total / weight, 0.0), 1.0)
    return Composite(value=value, status="partial" if missing else "complete", missing=missing)


def _mean(score: DimensionScore) -> float:
    assert score.mean is not None
    return score.mean


def subject_outcome(
    subject: str,
    invocations: int,
    dimensions: Mapping[Dimension, DimensionScore],
    contract: Contract,
) -> SubjectOutcome:
    """The subject's composite, band and governance action from its dimension scores."""
    score = composite(dimensions, contract)
    band = None if score.value is None else contract.band(score.value)
    return SubjectOutcome(
        subject=subject,
        invocations=invocations,
        dimensions={d: dimensions[d] for d in DIMENSIONS},
        composite=score,
        band=band,
        action=None if band is None else ACTIONS[band],
    )


def governance_finding(outcome: SubjectOutcome, report_id: str, at: datetime) -> Finding | None:
    """The `governance_action` Finding of a subject's band; None when there is no band."""
    if outcome.band is None or outcome.composite.value is None:
        return None
    score = outcome.composite
    partial = f", renormalised without {', '.join(score.missing)}" if score.missing else ""
    return Finding(
        kind="governance_action",
        run_id=report_id,
        subject=outcome.subject,
        occurred_at=at,
        summary=(
            f"{outcome.subject}: outcome score {score.value:.3f} ({score.status}{partial}) "
            f"over {outcome.invocations} invocation(s) → {outcome.band}: {outcome.action}"
        ),
        details=outcome.model_dump(mode="json"),
    )
