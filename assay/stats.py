"""Statistics for honest denominators. Formulas come from statsmodels/scipy, not by hand."""

from __future__ import annotations

from typing import NamedTuple


class Interval(NamedTuple):
    """A 95% confidence interval."""

    lo: float
    hi: float


def wilson(successes: int, n: int, alpha: float = 0.05) -> Interval | None:
    """Wilson score interval for successes/n; None when n == 0 (no data, no interval)."""
    if n == 0:
        return None
    from statsmodels.stats.proportion import proportion_confint  # heavy import, paid on use

    lo, hi = proportion_confint(successes, n, alpha=alpha, method="wilson")
    return Interval(max(0.0, float(lo)), min(1.0, float(hi)))
