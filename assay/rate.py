"""Rates: a proportion with its 95% Wilson interval (`assay.stats.wilson`), and its text.

One definition for every rate Assay reports — pass rates, monitor rates, calibration agreement,
sensitivity and specificity, pairwise win rates and position consistency. Each record names its
own counts (`completed`, `wins`, `tp`, …: their JSON keys are public), so `Rate` holds what they
share: the rate and its interval, all None when the denominator is 0 (no data, no figure).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel

from assay.stats import wilson


class Rate(BaseModel):
    """A proportion with its 95% Wilson interval; `rate`, `lo` and `hi` are None when n = 0."""

    rate: float | None
    lo: float | None
    hi: float | None

    @classmethod
    def of(cls, successes: int, total: int, /, **counts: Any) -> Self:
        """The rate `successes / total` with its interval, plus the record's own count fields."""
        interval = wilson(successes, total)
        return cls(
            rate=successes / total if total else None,
            lo=interval.lo if interval else None,
            hi=interval.hi if interval else None,
            **counts,
        )


def rate_text(numerator: int, denominator: int) -> str:
    """`0.900 (45/50, 95% CI 0.786–0.957)`, or `n/a (0/0)` when there is no denominator."""
    if denominator == 0:
        return f"n/a ({numerator}/{denominator})"
    interval = wilson(numerator, denominator)
    assert interval is not None
    return (
        f"{numerator / denominator:.3f} ({numerator}/{denominator}, "
        f"95% CI {interval.lo:.3f}–{interval.hi:.3f})"
    )
