"""Trial and cluster statistics against independent computations (numpy, scipy, statsmodels,
brute-force enumeration), never against Assay's own code; and the trial rule per policy.

The fixture: 12 cases × 3–6 trials with varied pass counts (some all-pass, some all-fail, some
flaky), drawn once from a seeded generator.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import statsmodels.api as sm
from scipy.optimize import brentq
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize

from assay.error_bars import clustered_mean, paired_mean_diff
from assay.errors import InputError
from assay.outputs.index import index_outputs
from assay.regression import RegressionStatus, RunSide, compare
from assay.runs.render import regression_lines
from assay.runs.scoring import CaseEvidence
from assay.runs.trial_rule import decide_trials
from assay.runs.trials import clustered_figure, trial_figures
from assay.scorers import Status
from assay.stats import minimum_detectable_drop
from assay.suites.suite import Case, Suite, TrialsPolicy

TOLERANCE = 1e-6


def _fixture() -> dict[str, list[int]]:
    """Per case, each trial's outcome (1 pass, 0 fail)."""
    rng = np.random.default_rng(20241101)
    cases: dict[str, list[int]] = {}
    for i in range(12):
        n = int(rng.integers(3, 7))
        p = [0.0, 1.0, 0.3, 0.5, 0.8][i % 5]
        cases[f"case-{i:02d}"] = [int(x) for x in rng.random(n) < p]
    return cases


def _miller_eq4(values: np.ndarray, groups: np.ndarray) -> float:
    """Miller (2024) eq. 4 written out literally: SE_CLT² (eq. 1, sample variance / n) plus the
    within-cluster cross products over i ≠ j, divided by n²."""
    n = len(values)
    mean = values.mean()
    clt = values.var(ddof=1) / n
    cross = 0.0
    for g in np.unique(groups):
        e = values[groups == g] - mean
        for i, j in itertools.permutations(range(len(e)), 2):
            cross += e[i] * e[j]
    return math.sqrt(clt + cross / n**2)


def test_every_trial_figure_equals_an_independent_computation() -> None:
    cases = _fixture()
    counts = {case: (len(t), sum(t)) for case, t in cases.items()}
    figures = trial_figures(counts)
    assert figures is not None

    values = np.array([x for t in cases.values() for x in t], dtype=float)
    groups = np.array([case for case, t in cases.items() for _ in t])
    n = len(values)
    assert (figures.cases, figures.trials) == (12, n)
    assert figures.k_min == min(len(t) for t in cases.values())
    assert figures.k_max == max(len(t) for t in cases.values())

    rate = figures.pass_rate
    assert rate.rate == pytest.approx(values.mean(), abs=TOLERANCE)
    assert rate.se == pytest.approx(_miller_eq4(values, groups), abs=TOLERANCE)
    # statsmodels' cluster-robust SE of an intercept-only OLS, no small-sample correction, is
    # (1/n²) Σ_c (Σ_i e_ic)²: eq. 4 differs from it only by the n − 1 of its CLT term.
    fit = sm.OLS(values, np.ones(n)).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    residuals = values - values.mean()
    extra = (residuals**2).sum() / (n**2 * (n - 1))
    assert rate.se == pytest.approx(math.sqrt(fit.bse[0] ** 2 + extra), abs=TOLERANCE)
    z = scipy.stats.norm.ppf(0.975)
    assert rate.lo == pytest.approx(max(0.0, values.mean() - z * rate.se), abs=TOLERANCE)
    assert rate.hi == pytest.approx(min(1.0, values.mean() + z * rate.se), abs=TOLERANCE)
    assert "Miller" in rate.method

    # pass@k and pass^k by enumerating every k-subset of each case's trials.
    for k in range(1, figures.k_min + 1):
        any_pass = [np.mean([max(s) for s in itertools.combinations(t, k)]) for t in cases.values()]
        all_pass = [np.mean([min(s) for s in itertools.combinations(t, k)]) for t in cases.values()]
        assert figures.pass_at_k[str(k)] == pytest.approx(np.mean(any_pass), abs=TOLERANCE)
        assert figures.pass_pow_k[str(k)] == pytest.approx(np.mean(all_pass), abs=TOLERANCE)
    assert set(figures.pass_at_k) == {str(k) for k in range(1, figures.k_min + 1)}

    flaky = [case for case, t in cases.items() if 0 < sum(t) < len(t)]
    assert flaky  # the fixture has some
    assert figures.flaky_cases == len(flaky) and figures.flaky == flaky


def test_with_one_item_per_cluster_eq4_is_the_plain_standard_error() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    estimate = clustered_mean(values, [str(i) for i in range(len(values))])
    assert estimate is not None
    assert estimate.se == pytest.approx(float(scipy.stats.sem(values)), abs=TOLERANCE)


def test_the_clustered_figure_matches_eq4_over_the_suites_clusters() -> None:
    clusters = ["doc-a"] * 4 + ["doc-b"] * 3 + [None] * 3
    outcomes = [1, 1, 1, 1, 0, 0, 1, 1, 0, 1]
    suite = Suite(
        suite="clustered",
        defaults=[{"contains": "x"}],
        cases=[Case(id=f"q{i}", input="?", cluster=cluster) for i, cluster in enumerate(clusters)],
    )
    evidence = [
        CaseEvidence(
            case_id=f"q{i}",
            status=Status.PASS if passed else Status.FAIL,
            score=float(passed),
            output_hmac=None,
            label="",
            checks=[],
        )
        for i, passed in enumerate(outcomes)
    ]
    figure = clustered_figure(evidence, suite)
    assert figure is not None
    groups = np.array([c or f"own-{i}" for i, c in enumerate(clusters)])
    values = np.array(outcomes, dtype=float)
    assert figure.clusters == 5
    assert figure.rate == pytest.approx(values.mean(), abs=TOLERANCE)
    assert figure.se == pytest.approx(_miller_eq4(values, groups), abs=TOLERANCE)
    plain = float(scipy.stats.sem(values))
    assert figure.se > plain  # agreeing questions about one document: the plain SE is too small


def test_the_paired_difference_se_is_the_standard_error_of_the_differences() -> None:
    rng = np.random.default_rng(7)
    before = rng.integers(0, 5, 30) / 4
    after = np.clip(before - rng.integers(0, 3, 30) / 4, 0, 1)
    estimate = paired_mean_diff(list(before), list(after))
    assert estimate is not None
    d = before - after
    assert estimate.mean == pytest.approx(d.mean(), abs=TOLERANCE)
    assert estimate.se == pytest.approx(float(scipy.stats.sem(d)), abs=TOLERANCE)
    # the same SE as the paired t-test's: t = mean / se
    t = scipy.stats.ttest_rel(before, after).statistic
    assert estimate.mean / estimate.se == pytest.approx(float(t), abs=1e-6)


@pytest.mark.parametrize(
    ("rate", "n1", "n2"), [(0.9, 50, 50), (0.75, 200, 120), (0.5, 30, 60), (0.98, 1000, 1000)]
)
def test_minimum_detectable_drop_is_statsmodels_power_solution(
    rate: float, n1: int, n2: int
) -> None:
    h = NormalIndPower().solve_power(
        effect_size=None, nobs1=n1, alpha=0.05, power=0.8, ratio=n2 / n1
    )
    # The rate whose Cohen's h from the baseline equals that effect, found by root search.
    lower = brentq(lambda p2: proportion_effectsize(rate, p2) - h, 1e-12, rate)
    assert minimum_detectable_drop(rate, n1, n2) == pytest.approx(rate - lower, abs=1e-4)
    # and the closed normal approximation: h = (z_.975 + z_.8)·√(1/n1 + 1/n2)
    closed = (scipy.stats.norm.ppf(0.975) + scipy.stats.norm.ppf(0.8)) * math.sqrt(1 / n1 + 1 / n2)
    assert h == pytest.approx(closed, rel=1e-3)


@pytest.mark.parametrize(
    ("rate", "n1", "n2"),
    [(0.9, 50, 50), (0.75, 200, 120), (0.5, 30, 60), (0.98, 1000, 1000), (0.6, 20, 100_000)],
)
@pytest.mark.parametrize("power", [0.5, 0.8, 0.95])
def test_minimum_detectable_effect_is_statsmodels_solve_power(
    rate: float, n1: int, n2: int, power: float
) -> None:
    drop = minimum_detectable_drop(rate, n1, n2, power=power)
    assert drop is not None and drop < rate
    effect = 2 * math.asin(math.sqrt(rate)) - 2 * math.asin(math.sqrt(rate - drop))
    # statsmodels' power at that effect is the power asked for, to rounding; its own root
    # search stops at a power within ~1e-5 of it, so its effect agrees only that far.
    achieved = NormalIndPower().power(effect, nobs1=n1, alpha=0.05, ratio=n2 / n1)
    assert achieved == pytest.approx(power, abs=1e-12)
    solved = NormalIndPower().solve_power(
        effect_size=None, nobs1=n1, alpha=0.05, power=power, ratio=n2 / n1
    )
    assert effect == pytest.approx(solved, rel=1e-4)


def test_a_drop_to_zero_too_small_to_see_is_the_whole_rate() -> None:
    assert minimum_detectable_drop(0.05, 5, 5) == pytest.approx(0.05)
    assert minimum_detectable_drop(0.9, 0, 10) is None


def _trials(*statuses: Status) -> list[CaseEvidence]:
    return [
        CaseEvidence(
            case_id="c",
            trial=i + 1,
            status=status,
            score=1.0 if status is Status.PASS else 0.0,
            output_hmac="h",
            label="",
            checks=[],
        )
        for i, status in enumerate(statuses)
    ]


P, F, S = Status.PASS, Status.FAIL, Status.SKIPPED


@pytest.mark.parametrize(
    ("policy", "trials", "expected"),
    [
        ("all", (P, P, P), P),
        ("all", (P, F, P), F),
        ("majority", (P, F, P), P),
        ("majority", (P, F, F), F),
        ("majority", (P, F, P, F), F),  # a tie is not a majority
        ("any", (F, F, P), P),
        ("any", (F, F, F), F),
    ],
)
def test_case_passes_policies_decide_the_case(
    policy: str, trials: tuple[Status, ...], expected: Status
) -> None:
    decided = decide_trials("c", _trials(*trials), TrialsPolicy(case_passes=policy))
    assert decided.status is expected
    passed = sum(t is P for t in trials)
    assert decided.label == f"{passed}/{len(trials)} trials passed ({policy})"


def test_fewer_than_min_trials_is_a_coverage_shortfall_not_a_pass() -> None:
    short = decide_trials("c", _trials(P, P), TrialsPolicy(min=3))
    assert short.status is Status.SKIPPED and not short.not_judged
    assert "2 of 3 trials scored" in short.label
    # an unscored trial does not count towards min
    assert decide_trials("c", _trials(P, P, S), TrialsPolicy(min=3)).status is Status.SKIPPED
    # a failed trial settles `all` whatever the missing trials would say
    assert decide_trials("c", _trials(F), TrialsPolicy(min=3)).status is Status.FAIL
    # two passes out of a wanted three already make a majority... but not min trials
    assert (
        decide_trials("c", _trials(P, P), TrialsPolicy(min=3, case_passes="majority")).status
        is Status.SKIPPED
    )
    assert decide_trials("c", [], TrialsPolicy(min=3)).missing


METHODOLOGY = Path(__file__).resolve().parent.parent / "docs" / "EVAL-METHODOLOGY.md"


def test_the_methodology_worked_example() -> None:
    """docs/EVAL-METHODOLOGY.md, "Trials, clusters and error bars": every number it prints is
    recomputed here independently (numpy, scipy, statsmodels) and found in the page."""
    table = {"A": [1, 1, 1], "B": [1, 0, 1], "C": [0, 0, 0], "D": [1, 1, 0]}
    values = np.array([x for t in table.values() for x in t], dtype=float)
    groups = np.array([case for case, t in table.items() for _ in t])
    fit = sm.OLS(values, np.ones(12)).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    squares = ((values - values.mean()) ** 2).sum()
    se = math.sqrt(fit.bse[0] ** 2 + squares / (144 * 11))
    z = scipy.stats.norm.ppf(0.975)
    comb = scipy.special.comb
    at_k = [
        np.mean([1 - comb(3 - sum(t), k) / comb(3, k) for t in table.values()]) for k in (1, 2, 3)
    ]
    pow_k = [np.mean([comb(sum(t), k) / comb(3, k) for t in table.values()]) for k in (1, 2, 3)]
    candidate = {"A": 2, "B": 1, "C": 0, "D": 1}
    d = np.array([sum(table[c]) / 3 - candidate[c] / 3 for c in table])
    paired_se = float(scipy.stats.sem(d))
    h = NormalIndPower().solve_power(effect_size=None, nobs1=50, alpha=0.05, power=0.8, ratio=1)
    lowest = brentq(lambda p2: proportion_effectsize(0.9, p2) - h, 1e-12, 0.9)

    page = METHODOLOGY.read_text()
    expected = [
        f"{values.mean():.4f}",
        f"{squares:.4f}",
        f"plain SE {scipy.stats.sem(values):.4f}",
        f"SE = √{se**2:.6f} = {se:.4f}",
        f"interval {values.mean() - z * se:.4f} to {values.mean() + z * se:.4f}",
        f"pass@1 {at_k[0]:.4f}, pass@2 {at_k[1]:.4f}, pass@3 {at_k[2]:.4f}",
        f"pass^1 {pow_k[0]:.4f}, pass^2 {pow_k[1]:.4f}, pass^3 {pow_k[2]:.4f}",
        f"d̄ = {d.mean():.4f}",
        f"SE = {paired_se:.4f}, interval +{d.mean() - z * paired_se:.4f} to "
        f"+{d.mean() + z * paired_se:.4f}",
        f"smaller than **{0.9 - lowest:.4f}**",
    ]
    for text in expected:
        assert text in page, text

    # and Assay's own figures give the same numbers
    figures = trial_figures({c: (3, sum(t)) for c, t in table.items()})
    assert figures is not None
    assert figures.pass_rate.se == pytest.approx(se, abs=TOLERANCE)
    assert figures.flaky == ["B", "D"]
    assert [figures.pass_at_k[str(k)] for k in (1, 2, 3)] == pytest.approx(at_k, abs=TOLERANCE)
    assert [figures.pass_pow_k[str(k)] for k in (1, 2, 3)] == pytest.approx(pow_k, abs=TOLERANCE)
    paired = paired_mean_diff(
        [sum(t) / 3 for t in table.values()], [v / 3 for v in candidate.values()]
    )
    assert paired is not None and paired.se == pytest.approx(paired_se, abs=TOLERANCE)
    assert minimum_detectable_drop(0.9, 50, 50) == pytest.approx(0.9 - lowest, abs=1e-4)
    policies = {
        policy: sum(
            decide_trials(
                c, _trials(*(P if x else F for x in t)), TrialsPolicy(case_passes=policy)
            ).status
            is P
            for c, t in table.items()
        )
        for policy in ("all", "majority", "any")
    }
    assert policies == {"all": 1, "majority": 3, "any": 3}
    assert "`all` passes A only (1/4); `majority` and `any` pass A, B, D (3/4)" in page


def _side(run_id: str, passed: int, scored: int) -> RunSide:
    return RunSide(
        run_id=run_id,
        passed=passed,
        scored=scored,
        score=passed / scored,
        suite_version=1,
        scorers=frozenset({"contains"}),
    )


def test_a_suite_too_small_to_see_the_threshold_says_so_in_the_summary() -> None:
    small = compare(_side("b", 18, 20), _side("c", 17, 20), threshold=0.05)
    assert small.status is not RegressionStatus.REGRESSED
    assert small.minimum_detectable_drop == pytest.approx(
        minimum_detectable_drop(0.9, 20, 20), abs=1e-12
    )
    assert small.blind_to_threshold
    assert any("would likely go undetected" in line for line in regression_lines(small))
    # 5,000 cases a side can see a 0.05 drop: nothing to warn about
    large = compare(_side("b", 4500, 5000), _side("c", 4490, 5000), threshold=0.05)
    assert large.minimum_detectable_drop is not None and large.minimum_detectable_drop < 0.05
    assert not large.blind_to_threshold
    assert not any("undetected" in line for line in regression_lines(large))
    # single-trial runs keep Newcombe + McNemar: no trial comparison
    assert small.trials is None and large.trials is None


def test_a_line_without_trial_is_trial_1_and_later_trials_alone_are_not_missing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "o.jsonl"
    path.write_text(
        '{"case_id": "a", "output": "x"}\n{"case_id": "b", "trial": 2, "output": "x"}\n'
        '{"case_id": "a", "trial": 1, "output": "x"}\n'
    )
    with pytest.raises(InputError) as raised:
        index_outputs(str(path), {"a", "b", "c"}, ["a", "b", "c"], 10)
    assert str(raised.value) == (
        f"{path} line 3, field trial: duplicate output for case 'a' trial 1"
        f" (first at {path} line 1)"
    )
    path.write_text(
        '{"case_id": "a", "output": "x"}\n{"case_id": "b", "trial": 2, "output": "x"}\n'
    )
    index = index_outputs(str(path), {"a", "b", "c"}, ["a", "b", "c"], 10)
    assert index.missing == ["c"] and index.trials and index.seen == 2
    path.write_text('{"case_id": "a", "output": "x"}\n')
    assert not index_outputs(str(path), {"a"}, ["a"], 10).trials
