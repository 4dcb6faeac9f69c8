"""Statistics for honest denominators (SPEC §1.3, §7, §9).

Every rate Assay shows carries a 95% interval; regressions, calibration and scorecards compare
rates with the intervals below. What every suite run computes — Wilson and Newcombe intervals,
the minimum detectable drop — is closed-form (or a few Newton steps) on the standard library, each
written out once with its citation and tested against statsmodels' value; the exact McNemar test
takes scipy's binomial distribution. statsmodels (~0.7 s to import) is left to the calibration
figures (kappa), and scipy (~0.2–0.5 s) is imported inside the functions that need it, so a run
or a CLI command that never computes such a figure does not pay for either.
Means with cluster-robust and paired standard errors (Miller 2024) are in `assay.error_bars`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any, NamedTuple


class Interval(NamedTuple):
    """A 95% confidence interval."""

    lo: float
    hi: float


class Kappa(NamedTuple):
    """Cohen's kappa with its asymptotic interval.

    `defined` is False (and every number None) when chance-corrected agreement cannot be measured
    on the table; `lo`/`hi` are None when the asymptotic interval is degenerate.
    """

    value: float | None
    lo: float | None
    hi: float | None
    defined: bool


class Correlation(NamedTuple):
    """Pearson's r and its two-sided p-value over `n` pairs (None when not computable)."""

    r: float | None
    p: float | None
    n: int


class Trend(NamedTuple):
    """OLS slope per run with its t interval over `n` runs (None when there are too few runs)."""

    slope: float | None
    lo: float | None
    hi: float | None
    n: int


def _scipy_stats() -> Any:
    """scipy.stats, imported on first use (heavy); scipy ships no type information."""
    import scipy.stats  # type: ignore[import-untyped]

    return scipy.stats


def wilson(successes: int, n: int, alpha: float = 0.05) -> Interval | None:
    """Wilson score interval for successes/n; None when n == 0 (no data, no interval).

    Wilson EB, "Probable inference, the law of succession, and statistical inference", J Am Stat
    Assoc 1927;22:209–212: with p = x/n and z the 1 − α/2 normal quantile,
    (p + z²/2n ± z·√(p(1 − p)/n + z²/4n²)) / (1 + z²/n), clamped to [0, 1] — the arithmetic of
    statsmodels' `proportion_confint(method="wilson")`, in its order (tests: equal to 1e-12).
    """
    if n == 0:
        return None
    z = NormalDist().inv_cdf(1 - alpha / 2)
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
    # At 0/n and n/n a limit is exactly 0 or 1; the arithmetic leaves a rounding error there.
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(lo, hi)


def newcombe_diff(x1: int, n1: int, x2: int, n2: int, alpha: float = 0.05) -> Interval | None:
    """Newcombe hybrid score interval for p1 − p2 of two independent proportions.

    Why this interval: it stays inside [−1, 1], behaves at 0/n and n/n, and has close to nominal
    coverage at the small run sizes Assay sees, where the Wald interval fails (SPEC §7 uses it to
    separate a regression from noise).

    Method 10 of Newcombe RG, "Interval estimation for the difference between independent
    proportions: comparison of eleven methods", Stat Med 1998;17:873–890: with Wilson limits
    (l1, u1) for p1 = x1/n1 and (l2, u2) for p2 = x2/n2,
    lo = (p1 − p2) − sqrt((p1 − l1)² + (u2 − p2)²) and
    hi = (p1 − p2) + sqrt((u1 − p1)² + (p2 − l2)²), as statsmodels'
    `confint_proportions_2indep(method="newcomb", compare="diff")` computes it (tests: to 1e-12).

    Args:
        x1: Successes in the first sample (e.g. the candidate run).
        n1: Size of the first sample.
        x2: Successes in the second sample (e.g. the baseline run).
        n2: Size of the second sample.
        alpha: 1 − confidence level.

    Returns:
        The interval, clamped to [−1, 1]; None when either sample is empty.
    """
    first, second = wilson(x1, n1, alpha), wilson(x2, n2, alpha)
    if first is None or second is None:
        return None
    p1, p2 = x1 / n1, x2 / n2
    lo = (p1 - p2) - math.sqrt((p1 - first.lo) ** 2 + (second.hi - p2) ** 2)
    hi = (p1 - p2) + math.sqrt((p2 - second.lo) ** 2 + (first.hi - p1) ** 2)
    return Interval(max(-1.0, lo), min(1.0, hi))


def paired_diff(
    both: int, first_only: int, second_only: int, neither: int, alpha: float = 0.05
) -> Interval | None:
    """Newcombe's hybrid score interval for p1 − p2 of two paired proportions.

    Why: when two runs scored the same cases, the pairing removes case-to-case variation, so this
    interval is narrower than the independent one for the same data (SPEC §7 paired analysis).
    statsmodels has no such interval, so the formula is written out here.

    Method 10 of Newcombe RG, "Improved confidence intervals for the difference between
    binomial proportions based on paired data", Stat Med 1998;17:2635–2650 (also Newcombe &
    Altman in Altman et al., "Statistics with Confidence", 2nd ed., 2000, ch. 6). With the 2×2
    table a = both, b = first_only, c = second_only, d = neither, n = a + b + c + d:

    - p1 = (a + b)/n, p2 = (a + c)/n, estimate θ = p1 − p2 = (b − c)/n;
    - (l1, u1), (l2, u2) = Wilson score intervals for p1 and p2 (`wilson`);
    - φ = correlation of the two margins, with Newcombe's continuity correction when positive:
      φ = max(ad − bc − n/2, 0)/√((a+b)(c+d)(a+c)(b+d)) if ad > bc,
      φ = (ad − bc)/√((a+b)(c+d)(a+c)(b+d)) otherwise, and φ = 0 when the product is 0;
    - lo = θ − √((p1 − l1)² − 2φ(p1 − l1)(u2 − p2) + (u2 − p2)²),
      hi = θ + √((u1 − p1)² − 2φ(u1 − p1)(p2 − l2) + (p2 − l2)²).

    The continuity-corrected φ is the form used in Newcombe & Altman's chapter and by Fagerland,
    Lydersen & Laake (Statistical Analysis of Contingency Tables, 2017, ch. 8); it reproduces
    their published interval for the Cavo et al. data (−0.1186 to −0.0046), which the
    uncorrected φ does not (−0.1174 to −0.0059).

    Args:
        both: Pairs where both succeeded (a).
        first_only: Pairs where only the first succeeded (b).
        second_only: Pairs where only the second succeeded (c).
        neither: Pairs where neither succeeded (d).
        alpha: 1 − confidence level.

    Returns:
        The interval for p1 − p2, within [−1, 1]; None when there are no pairs.

    Raises:
        ValueError: If a count is negative.
    """
    a, b, c, d = both, first_only, second_only, neither
    if min(a, b, c, d) < 0:
        raise ValueError(f"paired counts must be >= 0, got {(a, b, c, d)}")
    n = a + b + c + d
    if n == 0:
        return None
    p1, p2 = (a + b) / n, (a + c) / n
    ci1, ci2 = wilson(a + b, n, alpha), wilson(a + c, n, alpha)
    assert ci1 is not None and ci2 is not None  # n > 0
    l1, u1 = ci1
    l2, u2 = ci2

    margins = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    if margins == 0:
        phi = 0.0
    elif cross > 0:
        phi = max(cross - n / 2, 0.0) / math.sqrt(margins)
    else:
        phi = cross / math.sqrt(margins)

    theta = (b - c) / n
    down = (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2
    up = (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2
    lo = theta - math.sqrt(max(down, 0.0))
    hi = theta + math.sqrt(max(up, 0.0))
    return Interval(max(-1.0, lo), min(1.0, hi))


def mcnemar_exact(first_only: int, second_only: int) -> float:
    """Exact McNemar p-value: two-sided binomial test of the discordant pairs against 1/2.

    Why exact: the discordant counts in a regression comparison are small, where the chi-square
    approximation is unreliable. McNemar Q, "Note on the sampling error of the difference between
    correlated proportions or percentages", Psychometrika 1947;12:153–157; exact (conditional)
    form as in Fagerland MW, Lydersen S, Laake P, "The McNemar test for binary matched-pairs
    data", BMC Med Res Methodol 2013;13:91: p = min(1, 2·P(X ≤ min(b, c))), X ~ Bin(b + c, 1/2),
    as statsmodels' `mcnemar(exact=True)` computes it; P from scipy's binomial distribution
    function (`scipy.special.bdtr`).

    Args:
        first_only: Pairs where only the first succeeded (b).
        second_only: Pairs where only the second succeeded (c).

    Returns:
        The p-value; 1.0 when there are no discordant pairs (no evidence of a difference).
    """
    if first_only + second_only == 0:
        return 1.0
    from scipy.special import bdtr  # type: ignore[import-untyped]  # heavy import, paid on use

    tail = float(bdtr(min(first_only, second_only), first_only + second_only, 0.5))
    return min(1.0, 2.0 * tail)


def cohens_kappa(table: Sequence[Sequence[int]], alpha: float = 0.05) -> Kappa:
    """Cohen's kappa between human labels and judge verdicts, with its asymptotic interval.

    Why: raw agreement flatters a judge on a lopsided calibration set; kappa corrects for the
    agreement expected by chance (SPEC §9). Cohen J, "A coefficient of agreement for nominal
    scales", Educ Psychol Meas 1960;20:37–46; large-sample standard error of Fleiss JL, Cohen J,
    Everitt BS, Psychol Bull 1969;72:323–327 (Fleiss, Levin & Paik, Statistical Methods for Rates
    and Proportions, 3rd ed., 2003, ch. 18). Computed by statsmodels
    `statsmodels.stats.inter_rater.cohens_kappa`; interval = kappa ± z·SE, clamped to [−1, 1].

    Not defined (defined=False, all None — never a fake 0 or 1) when n == 0, when the human
    labels are all one class (kappa is then 0 or 0/0 whatever the judge does, so it measures
    nothing), or when the expected agreement is 1. When the asymptotic standard error is 0 or not
    finite (e.g. perfect agreement), the value is reported but lo/hi are None: a zero-width
    interval would claim a certainty the sample cannot give.

    Args:
        table: 2×2 counts; rows human pass/fail, columns judge pass/fail.
        alpha: 1 − confidence level.

    Returns:
        The kappa, its interval and whether it is defined.

    Raises:
        ValueError: If the table is not 2×2 or holds a negative count.
    """
    if len(table) != 2 or any(len(row) != 2 for row in table):
        raise ValueError("cohens_kappa needs a 2x2 table")
    cells = [[int(v) for v in row] for row in table]
    if any(v < 0 for row in cells for v in row):
        raise ValueError(f"kappa counts must be >= 0, got {cells}")
    undefined = Kappa(None, None, None, False)
    n = sum(map(sum, cells))
    human = [sum(row) for row in cells]
    judge = [cells[0][j] + cells[1][j] for j in range(2)]
    if n == 0 or 0 in human:
        return undefined
    expected = sum(h * j for h, j in zip(human, judge, strict=True)) / n**2
    if expected >= 1.0:
        return undefined

    from statsmodels.stats.inter_rater import cohens_kappa as sm_kappa  # heavy import

    with warnings.catch_warnings():
        # statsmodels divides by the null SE for its z statistic, which can be 0; unused here.
        warnings.simplefilter("ignore", RuntimeWarning)
        result = sm_kappa(cells)
    value = float(result.kappa)
    se = float(result.std_kappa)
    if not math.isfinite(se) or se == 0.0:
        return Kappa(value, None, None, True)
    z = NormalDist().inv_cdf(1 - alpha / 2)
    return Kappa(value, max(-1.0, value - z * se), min(1.0, value + z * se), True)


def pearson(x: Sequence[float], y: Sequence[float]) -> Correlation:
    """Pearson's product-moment correlation with its two-sided p-value.

    Why: verbosity bias is the correlation of output length with the judge's pass verdict
    (SPEC §9; with a 0/1 variable this is the point-biserial correlation). Pearson K, "Notes on
    regression and inheritance in the case of two parents", Proc R Soc Lond 1895;58:240–242;
    p from t = r·√(n − 2)/√(1 − r²) on n − 2 degrees of freedom. Computed by
    `scipy.stats.pearsonr`.

    Args:
        x: First variable (e.g. output lengths).
        y: Second variable, same length (e.g. 1 for judge pass, 0 for fail).

    Returns:
        r and p, both None when n < 3 or either variable is constant (r is then 0/0).

    Raises:
        ValueError: If x and y differ in length.
    """
    if len(x) != len(y):
        raise ValueError(f"pearson needs equal lengths, got {len(x)} and {len(y)}")
    n = len(x)
    if n < 3 or len(set(x)) == 1 or len(set(y)) == 1:
        return Correlation(None, None, n)
    result = _scipy_stats().pearsonr(x, y)
    return Correlation(float(result.statistic), float(result.pvalue), n)


def trend(values: Sequence[float], alpha: float = 0.05) -> Trend:
    """OLS slope of a series against its run index 0..n−1, with its t interval.

    Why: a scorecard shows whether a subject's pass rate is drifting across runs, and the
    interval says whether the drift is distinguishable from noise. Ordinary least squares with
    interval slope ± t(1 − α/2; n − 2)·SE(slope), SE(slope) = √(SSE/(n − 2)/Σ(i − ī)²)
    (e.g. Draper NR, Smith H, Applied Regression Analysis, 3rd ed., Wiley 1998, ch. 1). Slope and SE
    from `scipy.stats.linregress`, quantile from `scipy.stats.t`.

    Args:
        values: One value per run, oldest first.
        alpha: 1 − confidence level.

    Returns:
        The slope per run and its interval; None fields when n < 3 (too few runs: no degrees of
        freedom left for the error). A perfectly straight series has a zero-width interval.
    """
    n = len(values)
    if n < 3:
        return Trend(None, None, None, n)
    if len(set(values)) == 1:
        # A flat series is a perfect line of slope 0; linregress reports its SE as 0/0 (nan).
        return Trend(0.0, 0.0, 0.0, n)
    sps = _scipy_stats()
    fit = sps.linregress(range(n), values)
    slope, se = float(fit.slope), float(fit.stderr)
    half = float(sps.t.ppf(1 - alpha / 2, n - 2)) * se
    return Trend(slope, slope - half, slope + half, n)


def pass_at_k(n: int, c: int, k_max: int) -> list[float]:
    """Unbiased pass@k of one case with n trials, c of them passed, for k = 1 … k_max:
    1 − C(n−c, k)/C(n, k).

    Chen M et al., "Evaluating Large Language Models Trained on Code", arXiv:2107.03374 (2021),
    eq. 1: the chance that at least one of k trials drawn without replacement from the n passed
    (`scipy.stats.hypergeom.sf(0, n, c, k)`). Computed as `pass_pow_k` is, in O(k_max) time.

    Raises:
        ValueError: Unless 0 <= c <= n and 1 <= k_max <= n.
    """
    _check_trials(n, c, k_max)
    return [1.0 - missed for missed in _all_of_k(n, n - c, k_max)]


def pass_pow_k(n: int, c: int, k_max: int) -> list[float]:
    """pass^k of one case (τ-bench: Yao S et al., arXiv:2406.12045, 2024) for k = 1 … k_max:
    C(c, k)/C(n, k), the chance that all of k trials drawn without replacement from the n passed
    (`scipy.stats.hypergeom.pmf(k, n, c, k)`).

    The ratio is the running product Π_{j<k} (c − j)/(n − j), so all k_max figures take O(k_max)
    time; the ratio of two big-integer binomials for every k took seconds a case at 10,000
    trials. Each factor and each product is rounded once, so the figure for k is within 2k units
    in the last place of the exact ratio, relatively: closer than 3e-14 for k <= 100.

    Raises:
        ValueError: Unless 0 <= c <= n and 1 <= k_max <= n.
    """
    _check_trials(n, c, k_max)
    return _all_of_k(n, c, k_max)


def _all_of_k(n: int, good: int, k_max: int) -> list[float]:
    """C(good, k)/C(n, k) for k = 1 … k_max: the chance that k of n drawn without replacement
    are all among `good` of them."""
    ratios: list[float] = []
    ratio = 1.0
    for j in range(k_max):
        ratio *= (good - j) / (n - j)  # exactly 0.0 from k = good + 1 on
        ratios.append(ratio)
    return ratios


def _check_trials(n: int, c: int, k_max: int) -> None:
    if not (0 <= c <= n and 1 <= k_max <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k_max <= n, got n={n}, c={c}, k_max={k_max}")


_NEWTON_STEPS = 4
"""Newton steps for the minimum detectable effect: from its one-tail start the error falls below
1e-15 within three (tests)."""


def minimum_detectable_drop(
    baseline_rate: float, n_baseline: int, n_candidate: int, alpha: float = 0.05, power: float = 0.8
) -> float | None:
    """The smallest drop from `baseline_rate` that a two-sided test at `alpha` detects with
    `power`, with these two sample sizes.

    Cohen J, Statistical Power Analysis for the Behavioral Sciences, 2nd ed., 1988, ch. 6: the
    effect size of two proportions is h = 2·asin(√p1) − 2·asin(√p2). The h that reaches `power`
    solves Φ(h√m − z) + Φ(−h√m − z) = power, with z the 1 − α/2 normal quantile and
    m = n1·n2/(n1 + n2) — the two-sided power of statsmodels' `NormalIndPower` (nobs1 = the
    baseline's n, ratio = n_candidate/n_baseline): at this h statsmodels' power is `power` to
    1e-12 (tests; its own `solve_power` stops ~1e-5 short). Solved by Newton's method from
    h = (z + z_power)/√m, where the far tail is negligible. The rate it stands for is
    p2 = sin(asin(√p1) − h/2)², and the drop p1 − p2. When even a drop to 0 has less effect than
    h, the drop is the whole baseline rate (the suite cannot see any drop with that power).

    Returns:
        The drop in [0, baseline_rate]; None when either run has no cases.
    """
    if n_baseline <= 0 or n_candidate <= 0:
        return None
    normal = NormalDist()
    z = normal.inv_cdf(1 - alpha / 2)
    root = math.sqrt(n_baseline * n_candidate / (n_baseline + n_candidate))
    h = (z + normal.inv_cdf(power)) / root
    for _ in range(_NEWTON_STEPS):
        near, far = h * root - z, -h * root - z
        shortfall = normal.cdf(near) + normal.cdf(far) - power
        h -= shortfall / (root * (normal.pdf(near) - normal.pdf(far)))
    angle = math.asin(math.sqrt(min(max(baseline_rate, 0.0), 1.0))) - h / 2
    lowest = math.sin(angle) ** 2 if angle > 0 else 0.0
    return baseline_rate - lowest
