"""Means with error bars for items that are not independent samples (Miller 2024).

Miller E, "Adding Error Bars to Evals: A Statistical Approach to Language Model Evaluations",
arXiv:2411.00640 (2024): the cluster-robust standard error of a mean (eq. 4: trials of a case,
turns of a conversation, cases of a cluster) and the standard error of paired differences (two
runs over the same items). Closed form on the standard library; the tests hold each to numpy and
statsmodels (docs/EVAL-METHODOLOGY.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import NamedTuple


class MeanEstimate(NamedTuple):
    """A mean with its standard error and its 95% normal interval (clipped to the mean's range)."""

    mean: float
    se: float
    lo: float
    hi: float


Z95 = NormalDist().inv_cdf(0.975)
"""The two-sided 95% normal quantile (1.959964…)."""


def clustered_mean(
    values: Sequence[float], clusters: Sequence[str], bounds: tuple[float, float] = (0.0, 1.0)
) -> MeanEstimate | None:
    """Mean of per-item scores with the cluster-robust standard error of Miller (2024), eq. 4.

    Why: repeated trials of one case (or questions about one document) are not independent
    samples; the plain standard error treats them as such and is too small when items of a
    cluster agree. Miller E, "Adding Error Bars to Evals: A Statistical Approach to Language
    Model Evaluations", arXiv:2411.00640 (2024), eq. 4, with s̄ the mean of all n items:

        SE² = SE²_CLT + (1/n²) Σ_c Σ_i Σ_{j≠i} (s_{i,c} − s̄)(s_{j,c} − s̄),
        SE²_CLT = Σ (s_i − s̄)² / (n (n − 1))                                   (eq. 1)

    and no small-sample correction of the cluster term (no G/(G−1)). With one item per cluster
    it is the plain SE_CLT. It differs from statsmodels' cluster-robust covariance of an
    intercept-only OLS without correction (`cov_type="cluster"`, `use_correction=False`),
    (1/n²) Σ_c (Σ_i (s_{i,c} − s̄))², only in the CLT term's n − 1: by Σ(s_i − s̄)²/(n²(n − 1)).
    The interval is mean ± 1.96·SE clipped to `bounds` ([0, 1]: scores are rates).

    Args:
        values: One score per item (1.0 pass, 0.0 fail for a pass rate).
        clusters: The cluster of each item (a case id for trials).
        bounds: The range of the mean, the interval is clipped to.

    Returns:
        The estimate; None with no items. With one item the SE is 0 (nothing to estimate from).

    Raises:
        ValueError: If values and clusters differ in length.
    """
    if len(values) != len(clusters):
        raise ValueError(f"clustered_mean needs equal lengths, got {len(values)}, {len(clusters)}")
    n = len(values)
    if n == 0:
        return None
    mean = math.fsum(values) / n
    residual_sums: dict[str, float] = {}
    squares = 0.0
    for value, cluster in zip(values, clusters, strict=True):
        residual = value - mean
        squares += residual * residual
        residual_sums[cluster] = residual_sums.get(cluster, 0.0) + residual
    if n == 1:
        return MeanEstimate(mean, 0.0, mean, mean)
    # Σ_i Σ_{j≠i} e_i e_j within a cluster = (Σ_i e_i)² − Σ_i e_i².
    cross = math.fsum(total * total for total in residual_sums.values()) - squares
    variance = squares / (n * (n - 1)) + cross / (n * n)
    se = math.sqrt(max(variance, 0.0))
    low, high = bounds
    return MeanEstimate(mean, se, max(low, mean - Z95 * se), min(high, mean + Z95 * se))


def paired_mean_diff(first: Sequence[float], second: Sequence[float]) -> MeanEstimate | None:
    """Mean of paired differences first − second with its standard error (Miller 2024, §
    "Paired differences"): SE = sd(d)/√n with the sample standard deviation (n − 1) of
    d_i = first_i − second_i, i.e. √((Var(a) + Var(b) − 2 Cov(a, b))/n). The interval is
    d̄ ± 1.96·SE clipped to [−1, 1].

    Why: two runs over the same cases share each case's difficulty; differencing per case
    removes it, so the paired interval is narrower than the independent one on the same data.
    With trials, a and b are the per-case pass fractions (the trials of a case are averaged
    first, as the paper does for repeated answers to one question).

    Returns:
        The estimate; None with no pairs. With one pair the SE is 0.

    Raises:
        ValueError: If the sequences differ in length.
    """
    if len(first) != len(second):
        raise ValueError(f"paired_mean_diff needs equal lengths, got {len(first)}, {len(second)}")
    n = len(first)
    if n == 0:
        return None
    diffs = [a - b for a, b in zip(first, second, strict=True)]
    mean = math.fsum(diffs) / n
    if n == 1:
        return MeanEstimate(mean, 0.0, mean, mean)
    variance = math.fsum((d - mean) ** 2 for d in diffs) / (n - 1)
    se = math.sqrt(variance / n)
    return MeanEstimate(mean, se, max(-1.0, mean - Z95 * se), min(1.0, mean + Z95 * se))


def paired_clustered_diff(
    first: Sequence[float], second: Sequence[float], clusters: Sequence[str]
) -> MeanEstimate | None:
    """Mean of paired differences first − second of items that come in clusters, with the
    cluster-robust standard error of Miller (2024) eq. 4 applied to the differences.

    Why: two runs over the same conversations pair each turn with itself (differencing removes
    the turn's difficulty, shared by both runs: Miller's "paired differences"), and the turns of
    one conversation are not independent (they share its context, so eq. 4's clusters). With
    d_i = first_i − second_i over the N paired items and D_c the sum of d over cluster c:

        d̄ = Σ_c D_c / N  (the difference of the two means over the same items),
        SE² = Σ (d_i − d̄)² / (N (N − 1)) + (1/N²) Σ_c [(Σ_{i∈c} (d_i − d̄))² − Σ_{i∈c} (d_i − d̄)²]

    i.e. `clustered_mean` of the differences: statsmodels' cluster-robust variance of the
    intercept of an OLS of d on a constant without correction, (1/N²) Σ_c (D_c − n_c d̄)², plus
    Σ (d_i − d̄)²/(N²(N − 1)). With one item per cluster it is `paired_mean_diff`. The interval
    is d̄ ± 1.96·SE clipped to [−1, 1].

    Returns:
        The estimate; None with no pairs. With one pair the SE is 0.

    Raises:
        ValueError: If the sequences differ in length.
    """
    if not len(first) == len(second) == len(clusters):
        raise ValueError(
            "paired_clustered_diff needs equal lengths, got "
            f"{len(first)}, {len(second)}, {len(clusters)}"
        )
    diffs = [a - b for a, b in zip(first, second, strict=True)]
    return clustered_mean(diffs, clusters, bounds=(-1.0, 1.0))
