"""Monitor thresholds and the crossings they give (one `monitor_threshold` Finding per subject)."""

from __future__ import annotations

from typing import Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from assay.monitor.figures import Change, WindowStats, diff_text
from assay.rate import rate_text


class MonitorThresholds(BaseModel):
    """When a subject's window gives a finding. Rate limits use intervals, so that a handful of
    sessions cannot raise an alert on noise alone."""

    model_config = ConfigDict(extra="forbid")

    failure_rate: float = Field(default=0.20, ge=0, le=1)
    """Alert when the failure rate's 95% Wilson lower bound is above this."""
    failure_rate_rise: float = Field(default=0.05, ge=0, le=1)
    """Alert when the failure rate rose by more than this and the Newcombe interval of the rise
    lies above 0."""
    completion_rate_drop: float = Field(default=0.05, ge=0, le=1)
    """Alert when the completion rate fell by more than this and the Newcombe interval of the
    fall lies below 0."""
    high_severity_share: float = Field(default=0.05, ge=0, le=1)
    """Alert when the high/critical share's 95% Wilson lower bound is above this."""
    cost_per_completed_rise: float = Field(default=0.25, ge=0)
    """Alert when cost per completed session rose by more than this fraction (0.25 = 25%)."""
    cost_min_completed: int = Field(default=10, ge=1)
    """Compare cost per completed session only when both windows have at least this many
    completed sessions: the figure is a ratio without an interval, noisy on a few sessions."""


INTERVAL_THRESHOLDS: Final = (
    "failure_rate",
    "failure_rate_rise",
    "completion_rate_drop",
    "high_severity_share",
)
"""The rules read from fixed-n intervals: under a monitoring plan the confidence sequences
replace them (`assay.monitor.tracks.sequence_crossings`)."""


class Crossing(BaseModel):
    """One threshold a subject crossed: what was observed against which limit."""

    threshold: str
    """The `MonitorThresholds` field."""
    observed: float
    limit: float
    summary: str


def _credibly_above(threshold: str, lower_bound: float, limit: float, what: str) -> Crossing:
    """A rate whose 95% interval lies wholly above its limit."""
    return Crossing(
        threshold=threshold,
        observed=lower_bound,
        limit=limit,
        summary=f"{what} credibly above {limit:.2f}",
    )


def crossings(
    current: WindowStats, previous: WindowStats, moved: Change, thresholds: MonitorThresholds
) -> list[Crossing]:
    """Every threshold the current window crosses, in `MonitorThresholds` order."""
    t = thresholds
    found: list[Crossing] = []
    failure, severity = current.failure, current.high_severity
    if failure.lo is not None and failure.lo > t.failure_rate:
        what = f"failure rate {rate_text(failure.failed, failure.n)} is"
        found.append(_credibly_above("failure_rate", failure.lo, t.failure_rate, what))
    rise = moved.failure
    if rise is not None and rise.diff > t.failure_rate_rise and rise.lo > 0:
        found.append(
            Crossing(
                threshold="failure_rate_rise",
                observed=rise.diff,
                limit=t.failure_rate_rise,
                summary=f"failure rate up {diff_text(rise)} to {failure.failed}/{failure.n}",
            )
        )
    fall = moved.completion
    if fall is not None and -fall.diff > t.completion_rate_drop and fall.hi < 0:
        completion = current.completion
        found.append(
            Crossing(
                threshold="completion_rate_drop",
                observed=-fall.diff,
                limit=t.completion_rate_drop,
                summary=f"completion rate down {diff_text(fall)} to "
                f"{completion.completed}/{completion.n}",
            )
        )
    if severity.lo is not None and severity.lo > t.high_severity_share:
        what = f"high/critical findings in {rate_text(severity.flagged, severity.n)} of sessions,"
        found.append(
            _credibly_above("high_severity_share", severity.lo, t.high_severity_share, what)
        )
    cost = moved.cost_per_completed
    enough = min(current.cost_per_completed.completed, previous.cost_per_completed.completed)
    if cost is not None and cost > t.cost_per_completed_rise and enough >= t.cost_min_completed:
        found.append(
            Crossing(
                threshold="cost_per_completed_rise",
                observed=cost,
                limit=t.cost_per_completed_rise,
                summary=f"cost per completed session up {cost:+.0%} to "
                f"${current.cost_per_completed.value:.4f}",
            )
        )
    return found
