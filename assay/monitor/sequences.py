"""Anytime-valid confidence sequences for bounded means (the live monitor's statistics).

A fixed-n 95% interval recomputed at every window is a 95% statement about *one* look; checked
every hour it raises a false alarm far more often than 5% (docs/monitoring.md gives the measured
figures). A confidence sequence holds at every sample size at once, so the monitor may look as
often as it likes.

The sequence is the hedged-capital betting CS of Waudby-Smith & Ramdas (2023, "Estimating means
of bounded random variables by betting", JRSS-B, §4.2): for each candidate mean `m` on a grid, two
bettors wager a predictable fraction λ_t of their capital that the next observation lies above
(resp. below) `m`,

    K⁺_t(m) = Π (1 + λ⁺_i(m)(x_i − m)),   K⁻_t(m) = Π (1 − λ⁻_i(m)(x_i − m)),

and `m` leaves the sequence once max(θK⁺, (1 − θ)K⁻) ≥ 1/α (Ville's inequality bounds the chance
that this ever happens to the true mean by α). The bets are the predictable plug-in of the paper
(λ_t = √(2 log(1/α) / (t log(1 + t) σ̂²_{t−1})), truncated at c/m and c/(1 − m) with c = 1/2) and
the grid follows confseq's `betting_cs` (the bounds widened by one grid step), so the reference in
tests/test_monitor_sequences.py is a port of confseq's own loop. Everything is vectorised over
streams and the grid: shape (..., n) in, shape (..., n) out.

A paired sequence for the difference of two arms bets on d_i = (x_i − y_i + 1) / 2 ∈ [0, 1]
(pairs in arrival order; each pair is independent of the past, so the same guarantee holds for
the mean difference). `states` turns the difference's bounds into `degraded`, `holding` or
`inconclusive` against a pre-registered margin.
"""

from __future__ import annotations

from typing import Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

MonitorState = Literal["degraded", "holding", "inconclusive"]

STATES: Final[tuple[MonitorState, ...]] = ("inconclusive", "holding", "degraded")
"""`states` codes, in order: 0 inconclusive, 1 holding, 2 degraded."""

BREAKS: Final = 1000
"""Grid steps over [0, 1]: bounds to 0.001 (0.002 on a difference)."""

_CELLS_PER_CHUNK: Final = 4_000_000
"""Grid × observations evaluated at once: bounds memory (about 32 MB a float array)."""

_PRIOR_MEAN: Final = 0.5
_PRIOR_VARIANCE: Final = 0.25
_TRUNCATION: Final = 0.5
_THETA: Final = 0.5


def predictable_bets(x: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    """λ_t for each observation from the observations before it (WSR 2023 eq. 26, with one
    pseudo-observation at mean 1/2 and variance 1/4, as confseq's `lambda_predmix_eb`)."""
    t = np.arange(1, x.shape[-1] + 1, dtype=np.float64)
    mean = np.minimum((_PRIOR_MEAN + np.cumsum(x, axis=-1)) / (t + 1), 1.0)
    variance = (_PRIOR_VARIANCE + np.cumsum((x - mean) ** 2, axis=-1)) / (t + 1)
    previous = np.concatenate(
        [np.full((*x.shape[:-1], 1), _PRIOR_VARIANCE), variance[..., :-1]], axis=-1
    )
    bets: NDArray[np.float64] = np.sqrt(2 * np.log(1 / alpha) / (t * np.log1p(t) * previous))
    return bets


def betting_cs(
    x: ArrayLike, alpha: float = 0.05, breaks: int = BREAKS
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Lower and upper bounds of the hedged-capital confidence sequence after each observation.

    Args:
        x: Observations in [0, 1], shape (..., n): one stream per leading index.
        alpha: The chance that the sequence ever excludes the true mean.
        breaks: Grid steps over [0, 1].

    Returns:
        (lo, hi), each of shape (..., n): the bounds after 1, 2, …, n observations.
    """
    data = np.asarray(x, dtype=np.float64)
    if data.size and (data.min() < 0 or data.max() > 1):
        raise ValueError("observations must lie in [0, 1]")
    streams = data.reshape(-1, data.shape[-1])
    bets = predictable_bets(streams, alpha)
    grid = np.linspace(0.0, 1.0, breaks + 1)
    threshold = np.log(1 / alpha)
    lo = np.full(streams.shape, np.inf)
    hi = np.full(streams.shape, -np.inf)
    per_chunk = max(1, _CELLS_PER_CHUNK // max(1, streams.size))
    for start in range(0, grid.size, per_chunk):
        m = grid[start : start + per_chunk][None, :, None]
        with np.errstate(divide="ignore"):
            up = np.minimum(bets[:, None, :], _TRUNCATION / m)
        down = np.minimum(bets[:, None, :], _TRUNCATION / (1 - m + (m == 1)))
        down = np.where(m == 1, bets[:, None, :], down)
        excess = streams[:, None, :] - m
        log_up = np.cumsum(np.log1p(up * excess), axis=-1)
        log_down = np.cumsum(np.log1p(-down * excess), axis=-1)
        hedged = np.maximum(np.log(_THETA) + log_up, np.log(1 - _THETA) + log_down)
        inside = hedged < threshold
        lo = np.minimum(lo, np.where(inside, m, np.inf).min(axis=1))
        hi = np.maximum(hi, np.where(inside, m, -np.inf).max(axis=1))
    empty = ~np.isfinite(lo)
    lo = np.where(empty, 0.0, np.maximum(0.0, lo - 1 / breaks))
    hi = np.where(empty, 1.0, np.minimum(1.0, hi + 1 / breaks))
    return lo.reshape(data.shape), hi.reshape(data.shape)


def paired_difference_cs(
    candidate: ArrayLike, baseline: ArrayLike, alpha: float = 0.05, breaks: int = BREAKS
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Bounds on mean(candidate − baseline) after each pair, both arms in [0, 1], shape (..., n)
    each (pair them first: the i-th candidate observation with the i-th baseline one)."""
    shifted = (np.asarray(candidate, np.float64) - np.asarray(baseline, np.float64) + 1) / 2
    lo, hi = betting_cs(shifted, alpha, breaks)
    return 2 * lo - 1, 2 * hi - 1


def states(
    lo: ArrayLike, hi: ArrayLike, margin: float, higher_is_better: bool = True
) -> NDArray[np.int8]:
    """The monitor's state after each pair, from the difference's bounds (codes: `STATES`).

    `degraded` once the difference was ever credibly worse than −margin (an anytime-valid
    rejection is final, so it never flips back); otherwise `holding` once it was ever credibly
    better than −margin (the running intersection: under a constant difference the sequence's
    running maximum lower bound is still a 95% bound); otherwise `inconclusive`.
    """
    low, high = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
    worst, best = (high, low) if higher_is_better else (-low, -high)
    degraded = np.maximum.accumulate(worst < -margin, axis=-1)
    holding = np.maximum.accumulate(best > -margin, axis=-1)
    return np.where(degraded, 2, np.where(holding, 1, 0)).astype(np.int8)
