"""assay.stats against published reference values and hand arithmetic, never against itself.

Every expected number below is either printed in the cited source or derived here from the
cited formula with plain `math`, intermediate numbers written out, so a wrong library call or a
wrong formula in assay.stats fails the test. The closed forms that replaced statsmodels calls (so
that a run need not import it) are also held to statsmodels' own values, to 1e-12.
"""

from __future__ import annotations

import math

import pytest

from assay.stats import (
    Correlation,
    Interval,
    Kappa,
    Trend,
    cohens_kappa,
    mcnemar_exact,
    newcombe_diff,
    paired_diff,
    pearson,
    trend,
    wilson,
)

TOL = 1e-4  # published tables give 4 decimals
Z = 1.959963984540054  # z_{0.975}


def _close(got: Interval | None, lo: float, hi: float, tol: float = TOL) -> None:
    assert got is not None
    assert got.lo == pytest.approx(lo, abs=tol)
    assert got.hi == pytest.approx(hi, abs=tol)


def _wilson_by_hand(x: int, n: int) -> tuple[float, float]:
    """Wilson EB, JASA 1927;22:209–212, closed form:
    (2x + z² ∓ z·√(z² + 4x(n − x)/n)) / (2(n + z²))."""
    centre = 2 * x + Z * Z
    spread = Z * math.sqrt(Z * Z + 4 * x * (n - x) / n)
    return (centre - spread) / (2 * (n + Z * Z)), (centre + spread) / (2 * (n + Z * Z))


# --- Wilson --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "n", "lo", "hi"),
    [
        # Newcombe RG, "Two-sided confidence intervals for the single proportion: comparison of
        # seven methods", Stat Med 1998;17:857–872, Table I, method 3 (score, no continuity
        # correction), examples (a)–(d).
        (81, 263, 0.2553, 0.3662),
        (15, 148, 0.0624, 0.1605),
        (0, 20, 0.0000, 0.1611),
        (1, 29, 0.0061, 0.1718),
    ],
)
def test_wilson_matches_newcombe_1998_table_i(x: int, n: int, lo: float, hi: float) -> None:
    _close(wilson(x, n), lo, hi)


def test_wilson_edges() -> None:
    # 0/n: lower limit exactly 0, upper z²/(n + z²) = 3.841459/23.841459 = 0.161125 (n = 20).
    got = wilson(0, 20)
    assert got is not None and got.lo == 0.0
    assert got.hi == pytest.approx(Z * Z / (20 + Z * Z), abs=1e-9)
    # n/n mirrors 0/n: 1 − 0.161125 = 0.838875 to 1 (statsmodels returns 1 − 1e-16 here).
    got = wilson(20, 20)
    assert got is not None and got.hi == pytest.approx(1.0, abs=1e-12)
    assert got.lo == pytest.approx(20 / (20 + Z * Z), abs=1e-9)
    # No data, no interval.
    assert wilson(0, 0) is None


def test_wilson_closed_form_agrees_with_table_i() -> None:
    # The hand formula used below for the paired interval reproduces Newcombe's Table I too.
    lo, hi = _wilson_by_hand(81, 263)
    assert (lo, hi) == (pytest.approx(0.2553, abs=TOL), pytest.approx(0.3662, abs=TOL))


# --- Newcombe, independent difference -----------------------------------------------------------


@pytest.mark.parametrize(
    ("x1", "n1", "x2", "n2", "lo", "hi"),
    [
        # Newcombe RG, "Interval estimation for the difference between independent proportions:
        # comparison of eleven methods", Stat Med 1998;17:873–890, Table II, method 10
        # (hybrid score, no continuity correction), examples (a)–(h).
        (56, 70, 48, 80, 0.0524, 0.3339),
        (9, 10, 3, 10, 0.1705, 0.8090),
        # Method 10 for 6/7 − 2/7 is 0.0582 to 0.8062. (0.0342 to 0.8534, sometimes quoted for
        # this row, is not method 10: hand check, with Wilson 6/7 = 0.4869–0.9743 and
        # 2/7 = 0.0822–0.6411, lo = 0.5714 − √(0.3702² + 0.3554²) = 0.5714 − 0.5132 = 0.0582.)
        (6, 7, 2, 7, 0.0582, 0.8062),
        (5, 56, 0, 29, -0.0381, 0.1926),
        (0, 10, 0, 20, -0.1611, 0.2775),
        (0, 10, 0, 10, -0.2775, 0.2775),
        (10, 10, 0, 20, 0.6791, 1.0000),
        (10, 10, 0, 10, 0.6075, 1.0000),
    ],
)
def test_newcombe_diff_matches_newcombe_1998_table_ii(
    x1: int, n1: int, x2: int, n2: int, lo: float, hi: float
) -> None:
    _close(newcombe_diff(x1, n1, x2, n2), lo, hi)


def test_newcombe_diff_edges() -> None:
    assert newcombe_diff(0, 0, 3, 10) is None
    assert newcombe_diff(3, 10, 0, 0) is None
    got = newcombe_diff(10, 10, 0, 10)
    assert got is not None and -1.0 <= got.lo <= got.hi <= 1.0


# --- Newcombe, paired difference ----------------------------------------------------------------


def _paired_by_hand(
    a: int, b: int, c: int, d: int, w1: tuple[float, float], w2: tuple[float, float], phi: float
) -> tuple[float, float]:
    """Newcombe 1998 (Stat Med 17:2635–2650) method 10 from written-out Wilson limits."""
    n = a + b + c + d
    p1, p2, theta = (a + b) / n, (a + c) / n, (b - c) / n
    (l1, u1), (l2, u2) = w1, w2
    lo = theta - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    hi = theta + math.sqrt((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2)
    return lo, hi


def test_paired_diff_published_cavo_example() -> None:
    # Fagerland MW, Lydersen S, Laake P, Statistical Analysis of Contingency Tables (CRC, 2017),
    # ch. 8, complete response before/after consolidation therapy (Cavo et al. 2012):
    # a=59, b=6, c=16, d=80, estimate −0.0621, Newcombe square-and-add 95% CI −0.1186 to −0.0046
    # (the same numbers are asserted in the authors' R package `contingencytables`,
    # tests/testthat/test-ch8.R). Here ad − bc = 4720 − 96 = 4624 > n/2 = 80.5, so the φ
    # correction is active; the uncorrected φ would give −0.1174 to −0.0059 and fail.
    _close(paired_diff(59, 6, 16, 80), -0.1186, -0.0046)


def test_paired_diff_phi_zeroed_by_correction_bentur_table() -> None:
    # Bentur et al. 2009 airway hyper-responsiveness (used by Fagerland et al., Stat Med
    # 2014;33:2850–2875): a=1, b=1, c=7, d=12, n=21, θ = (1 − 7)/21 = −0.285714.
    # ad − bc = 12 − 7 = 5 ≤ n/2 = 10.5, so φ* = max(5 − 10.5, 0)/√… = 0.
    # Wilson 2/21 = 0.026519 to 0.289141; Wilson 8/21 = 0.207510 to 0.591213.
    w1, w2 = (0.026519, 0.289141), (0.207510, 0.591213)
    assert _wilson_by_hand(2, 21) == (
        pytest.approx(w1[0], abs=1e-6),
        pytest.approx(w1[1], abs=1e-6),
    )
    assert _wilson_by_hand(8, 21) == (
        pytest.approx(w2[0], abs=1e-6),
        pytest.approx(w2[1], abs=1e-6),
    )
    # lo = −0.285714 − √(0.068719² + 0.210261²) = −0.285714 − 0.221205 = −0.506919
    # hi = −0.285714 + √(0.193903² + 0.173442²) = −0.285714 + 0.260154 = −0.025560
    lo, hi = _paired_by_hand(1, 1, 7, 12, w1, w2, phi=0.0)
    assert (lo, hi) == (pytest.approx(-0.506919, abs=1e-5), pytest.approx(-0.025560, abs=1e-5))
    _close(paired_diff(1, 1, 7, 12), -0.506919, -0.025560)


def test_paired_diff_negative_phi_uncorrected() -> None:
    # a=3, b=8, c=2, d=1, n=14: p1 = 11/14 = 0.785714, p2 = 5/14 = 0.357143, θ = 6/14 = 0.428571.
    # ad − bc = 3 − 16 = −13 < 0, so φ = −13/√(11·3·5·9) = −13/√1485 = −0.337350 (no correction).
    # Wilson 11/14 = 0.524108 to 0.924286; Wilson 5/14 = 0.163447 to 0.612356.
    w1, w2 = (0.524108, 0.924286), (0.163447, 0.612356)
    phi = -13 / math.sqrt(1485)
    assert phi == pytest.approx(-0.337350, abs=1e-6)
    # lo = 0.428571 − √(0.261606² + 2·0.337350·0.261606·0.255213 + 0.255213²)
    #    = 0.428571 − √0.178619 = 0.428571 − 0.422634 = 0.005937
    # hi = 0.428571 + √(0.138572² + 2·0.337350·0.138572·0.193696 + 0.193696²)
    #    = 0.428571 + √0.074830 = 0.428571 + 0.273551 = 0.702122
    lo, hi = _paired_by_hand(3, 8, 2, 1, w1, w2, phi)
    assert (lo, hi) == (pytest.approx(0.005937, abs=1e-5), pytest.approx(0.702122, abs=1e-5))
    _close(paired_diff(3, 8, 2, 1), 0.005937, 0.702122)


def test_paired_diff_no_discordant_pairs() -> None:
    # a=5, b=0, c=0, d=5: θ = 0, p1 = p2 = 0.5, Wilson 5/10 = 0.236593 to 0.763407 (half-width
    # 0.263407). φ* = (25 − 0 − 10/2)/√(5·5·5·5) = 20/25 = 0.8.
    # Both limits: √(2·0.263407² − 2·0.8·0.263407²) = 0.263407·√0.4 = 0.166592.
    _close(paired_diff(5, 0, 0, 5), -0.166592, 0.166592, tol=1e-5)
    # All pairs succeeded: margins product 0 → φ = 0; Wilson 10/10 = 0.722467 to 1, so both
    # limits are √(0.277533² + 0²) = 0.277533 (the same as Table II row 0/10 − 0/10).
    _close(paired_diff(10, 0, 0, 0), -0.277533, 0.277533, tol=1e-5)


def test_paired_diff_edges() -> None:
    assert paired_diff(0, 0, 0, 0) is None
    # Extreme: every pair only-first → θ = 1; the interval stays inside [−1, 1].
    got = paired_diff(0, 10, 0, 0)
    assert got is not None and -1.0 <= got.lo <= 1.0 and got.hi == 1.0
    with pytest.raises(ValueError):
        paired_diff(1, -1, 0, 0)


# --- the closed forms against statsmodels ---------------------------------------------------------

COUNTS = [(0, 1), (0, 20), (1, 29), (15, 148), (81, 263), (29, 29), (500, 1000), (99_990, 100_000)]


@pytest.mark.parametrize(("x", "n"), COUNTS)
@pytest.mark.parametrize("alpha", [0.05, 0.01, 0.2])
def test_wilson_is_statsmodels_wilson(x: int, n: int, alpha: float) -> None:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(x, n, alpha=alpha, method="wilson")
    _close(wilson(x, n, alpha), float(lo), float(hi), tol=1e-12)


@pytest.mark.parametrize(("x1", "n1"), COUNTS[::2])
@pytest.mark.parametrize(("x2", "n2"), COUNTS[1::2])
def test_newcombe_diff_is_statsmodels_newcomb(x1: int, n1: int, x2: int, n2: int) -> None:
    from statsmodels.stats.proportion import confint_proportions_2indep

    lo, hi = confint_proportions_2indep(x1, n1, x2, n2, method="newcomb", compare="diff")
    _close(newcombe_diff(x1, n1, x2, n2), max(-1.0, float(lo)), min(1.0, float(hi)), tol=1e-12)


@pytest.mark.parametrize(
    ("first_only", "second_only"), [(1, 9), (0, 5), (3, 3), (40, 61), (1200, 1000), (7, 5000)]
)
def test_mcnemar_exact_is_statsmodels_exact_mcnemar(first_only: int, second_only: int) -> None:
    from statsmodels.stats.contingency_tables import mcnemar

    expected = float(mcnemar([[0, first_only], [second_only, 0]], exact=True).pvalue)
    assert mcnemar_exact(first_only, second_only) == pytest.approx(expected, rel=1e-12, abs=1e-300)


# --- McNemar exact ------------------------------------------------------------------------------


def test_mcnemar_exact() -> None:
    # Two-sided exact binomial on the discordant pairs: 2·P(X ≤ min(b, c)), X ~ Bin(b + c, 1/2).
    # b=1, c=9: 2·(C(10,0) + C(10,1))/2¹⁰ = 2·11/1024 = 0.021484375.
    assert mcnemar_exact(1, 9) == pytest.approx(22 / 1024, abs=1e-12)
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024, abs=1e-12)
    # b=0, c=5: 2·1/32 = 0.0625.
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32, abs=1e-12)
    # b=3, c=3: 2·P(X ≤ 3; 6) = 2·42/64 > 1, capped at 1.
    assert mcnemar_exact(3, 3) == 1.0
    # No discordant pairs: no evidence of a difference.
    assert mcnemar_exact(0, 0) == 1.0


# --- Cohen's kappa ------------------------------------------------------------------------------


def test_cohens_kappa_published_example() -> None:
    # Bonett DG, R package statpsych, reference page of ci.kappa (SE per Fleiss, Levin & Paik,
    # Statistical Methods for Rates and Proportions, 3rd ed., 2003):
    # ci.kappa(.05, f00=31, f01=12, f10=4, f11=58) → Cohen kappa 0.6756757, SE 0.07344761,
    # 95% CI 0.5317210 to 0.8196303. Rows = one rater (y), columns = the other (x).
    got = cohens_kappa([[58, 4], [12, 31]])
    assert got.defined
    assert got.value == pytest.approx(0.6756757, abs=1e-6)
    assert got.lo == pytest.approx(0.5317210, abs=1e-6)
    assert got.hi == pytest.approx(0.8196303, abs=1e-6)


def test_cohens_kappa_wikipedia_example_with_hand_interval() -> None:
    # Wikipedia, "Cohen's kappa", worked example: 50 proposals, both yes 20, A yes/B no 5,
    # A no/B yes 10, both no 15 → p_o = 0.7, p_e = 0.5·0.6 + 0.5·0.4 = 0.5, κ = 0.4.
    # SE by Fleiss, Cohen & Everitt (1969), Psychol Bull 72:323–327 (rows r = 0.5, 0.5;
    # columns c = 0.6, 0.4):
    #   A = Σ p_ii[1 − (r_i + c_i)(1 − κ)]² = 0.4·(1 − 1.1·0.6)² + 0.3·(1 − 0.9·0.6)²
    #     = 0.4·0.1156 + 0.3·0.2116 = 0.10972
    #   B = (1 − κ)² Σ_{i≠j} p_ij (c_i + r_j)² = 0.36·(0.1·1.1² + 0.2·0.9²) = 0.36·0.283 = 0.10188
    #   C = (κ − p_e(1 − κ))² = (0.4 − 0.3)² = 0.01
    #   var = (A + B − C)/(n(1 − p_e)²) = 0.2016/12.5 = 0.016128, SE = 0.126996
    se = math.sqrt((0.10972 + 0.10188 - 0.01) / (50 * 0.25))
    got = cohens_kappa([[20, 5], [10, 15]])
    assert got.defined
    assert got.value == pytest.approx(0.4, abs=1e-12)
    assert got.lo == pytest.approx(0.4 - Z * se, abs=1e-6)  # 0.151092
    assert got.hi == pytest.approx(0.4 + Z * se, abs=1e-6)  # 0.648908


def test_cohens_kappa_perfect_agreement() -> None:
    # Both classes present, no disagreement: κ = (1 − p_e)/(1 − p_e) = 1 exactly. Its asymptotic
    # SE is 0, so no interval is claimed.
    got = cohens_kappa([[6, 0], [0, 4]])
    assert got == Kappa(1.0, None, None, True)


def test_cohens_kappa_undefined() -> None:
    undefined = Kappa(None, None, None, False)
    # All human labels pass: p_e = 1·p_judge_pass, so κ = 0 whatever the judge does.
    assert cohens_kappa([[7, 3], [0, 0]]) == undefined
    # All labels one class on both sides: p_e = 1, κ = 0/0.
    assert cohens_kappa([[10, 0], [0, 0]]) == undefined
    assert cohens_kappa([[0, 0], [0, 9]]) == undefined
    # No data.
    assert cohens_kappa([[0, 0], [0, 0]]) == undefined


def test_cohens_kappa_constant_judge_is_a_real_zero() -> None:
    # Humans split 5/5, judge always passes: p_o = p_e = 0.5, κ = 0 — a genuine measurement
    # (the judge discriminates nothing), but its asymptotic SE is 0, so no interval.
    assert cohens_kappa([[5, 0], [5, 0]]) == Kappa(0.0, None, None, True)


def test_cohens_kappa_rejects_bad_tables() -> None:
    with pytest.raises(ValueError):
        cohens_kappa([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError):
        cohens_kappa([[1, -2], [3, 4]])


# --- Pearson ------------------------------------------------------------------------------------


def _t_two_sided_p_odd_df(t: float, df: int) -> float:
    """Two-sided Student t p-value for odd df, Abramowitz & Stegun 26.7.3:
    P(|T| < t) = (2/π)[θ + sinθ(cosθ + (2/3)cos³θ + … + (2·4…(ν−3))/(3·5…(ν−2))cos^(ν−2)θ)],
    θ = atan(t/√ν)."""
    assert df % 2 == 1
    theta = math.atan(abs(t) / math.sqrt(df))
    series, term = 0.0, math.cos(theta)
    for k in range(1, df - 1, 2):  # k = 1, 3, …, ν − 2
        series += term
        term *= (k + 1) / (k + 2) * math.cos(theta) ** 2
    inside = 2 / math.pi * (theta + (math.sin(theta) * series if df > 1 else 0.0))
    return 1.0 - inside


# Anscombe FJ, "Graphs in statistical analysis", Am Stat 1973;27:17–21, data set I.
ANSCOMBE_X = [10, 8, 13, 9, 11, 14, 6, 4, 12, 7, 5]
ANSCOMBE_Y1 = [8.04, 6.95, 7.58, 8.81, 8.33, 9.96, 7.24, 4.26, 10.84, 4.82, 5.68]


def test_pearson_anscombe() -> None:
    # Anscombe (1973) reports r = 0.82 and, for the slope, t = 4.24 on 9 df for every data set;
    # to more places r = 0.816421. p from t = r√9/√(1 − r²) = 4.2415 by A&S 26.7.3 = 0.00217.
    got = pearson(ANSCOMBE_X, ANSCOMBE_Y1)
    assert got.n == 11 and got.r is not None and got.p is not None
    assert got.r == pytest.approx(0.816421, abs=1e-6)
    assert round(got.r, 2) == 0.82
    t = got.r * 3 / math.sqrt(1 - got.r**2)
    assert round(t, 2) == 4.24
    assert got.p == pytest.approx(_t_two_sided_p_odd_df(t, 9), abs=1e-9)
    assert got.p == pytest.approx(0.00217, abs=1e-5)


def test_pearson_by_hand() -> None:
    # x = 1..5, y = 2,4,5,4,5: x̄ = 3, ȳ = 4; Sxy = (−2)(−2)+(−1)(0)+0+(1)(0)+(2)(1) = 6,
    # Sxx = 10, Syy = 4+0+1+0+1 = 6 → r = 6/√60 = 0.774597.
    # t = r√3/√(1 − r²) = 0.774597·1.732051/0.632456 = 2.121320 (= 3/√2), 3 df:
    # θ = atan(2.121320/√3) = atan(1.224745) = 0.886077, p = 1 − (2/π)(θ + sinθ·cosθ) = 0.124027.
    got = pearson([1, 2, 3, 4, 5], [2, 4, 5, 4, 5])
    assert got.r == pytest.approx(6 / math.sqrt(60), abs=1e-12)
    assert got.p == pytest.approx(_t_two_sided_p_odd_df(3 / math.sqrt(2), 3), abs=1e-9)
    assert got.p == pytest.approx(0.124027, abs=1e-6)


def test_pearson_undefined_cases() -> None:
    assert pearson([1, 2, 3], [5, 5, 5]) == Correlation(None, None, 3)  # constant y
    assert pearson([7, 7, 7, 7], [0, 1, 0, 1]) == Correlation(None, None, 4)  # constant x
    assert pearson([1, 2], [3, 4]) == Correlation(None, None, 2)  # n < 3
    assert pearson([], []) == Correlation(None, None, 0)
    with pytest.raises(ValueError):
        pearson([1, 2, 3], [1, 2])


def test_pearson_point_biserial_for_verbosity_bias() -> None:
    # Length vs pass (0/1): the judge passes exactly the two longest outputs.
    # x̄ = 250, ȳ = 0.5; Sxy = (−150)(−0.5)+(−50)(−0.5)+(50)(0.5)+(150)(0.5) = 200,
    # Sxx = 2·150² + 2·50² = 50000, Syy = 1 → r = 200/√50000 = 0.894427.
    got = pearson([100, 200, 300, 400], [0, 0, 1, 1])
    assert got.r == pytest.approx(200 / math.sqrt(50000), abs=1e-12)


# --- Trend --------------------------------------------------------------------------------------


def test_trend_perfect_line_collapses() -> None:
    assert trend([1.0, 3.0, 5.0, 7.0, 9.0]) == Trend(2.0, 2.0, 2.0, 5)
    assert trend([0.9, 0.9, 0.9]) == Trend(0.0, 0.0, 0.0, 3)


def test_trend_by_hand() -> None:
    # values 0, 2, 1, 3 at runs 0..3: ī = 1.5, ȳ = 1.5; Sxx = 2.25+0.25+0.25+2.25 = 5,
    # Sxy = 2.25 − 0.25 − 0.25 + 2.25 = 4 → slope 0.8, intercept 1.5 − 1.2 = 0.3.
    # Fitted 0.3, 1.1, 1.9, 2.7; residuals −0.3, 0.9, −0.9, 0.3; SSE = 1.8; s² = 1.8/2 = 0.9;
    # SE = √(0.9/5) = √0.18 = 0.424264.
    # t_{0.975, 2}: the t₂ CDF is ½ + t/(2√(2 + t²)), so t/√(2 + t²) = 0.95 → t² = 2·0.9025/0.0975
    # → t = 4.302653 (tables: 4.303). Interval 0.8 ± 4.302653·0.424264 = 0.8 ± 1.825470.
    t2 = math.sqrt(2 * 0.95**2 / (1 - 0.95**2))
    assert t2 == pytest.approx(4.302653, abs=1e-6)
    half = t2 * math.sqrt(0.18)
    got = trend([0.0, 2.0, 1.0, 3.0])
    assert got.n == 4 and got.slope is not None and got.lo is not None and got.hi is not None
    assert got.slope == pytest.approx(0.8, abs=1e-12)
    assert got.lo == pytest.approx(0.8 - half, abs=1e-6)  # −1.025470
    assert got.hi == pytest.approx(0.8 + half, abs=1e-6)  # 2.625470


def test_trend_anscombe_published_slope() -> None:
    # Anscombe (1973) data set I sorted by x: x = 4..14 is run index + 4, so the slope per run is
    # Anscombe's regression slope, reported as 0.500 (Σ(x − x̄)² = 110, Sxy = 55.01 → 0.500091)
    # with standard error 0.118; t_{0.975, 9} = 2.262 (t tables).
    y_by_x = [y for _, y in sorted(zip(ANSCOMBE_X, ANSCOMBE_Y1, strict=True))]
    got = trend(y_by_x)
    assert got.slope == pytest.approx(55.01 / 110, abs=1e-9)
    assert got.lo is not None and got.hi is not None
    assert got.lo == pytest.approx(0.5001 - 2.262 * 0.118, abs=1e-3)  # 0.2332
    assert got.hi == pytest.approx(0.5001 + 2.262 * 0.118, abs=1e-3)  # 0.7670


def test_trend_too_few_runs() -> None:
    assert trend([0.5, 0.7]) == Trend(None, None, None, 2)
    assert trend([0.5]) == Trend(None, None, None, 1)
    assert trend([]) == Trend(None, None, None, 0)
