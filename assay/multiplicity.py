"""Many regression tests at once: each test's p-value, and the family's adjusted figures.

A nightly asks one question per suite job ("did this run regress against its baseline?") and,
where slices are shown, one per tag, check kind and turn index. Each at 5% alone, a night with no
real change still reports several regressions. So every test a nightly ran is reported with

- its **raw p**: the p-value of the test its decision rests on (below);
- its **Holm** adjusted p (Holm S, "A simple sequentially rejective multiple test procedure",
  Scand J Stat 1979;6:65–70): the family-wise error rate — what a `regressed` decision needs;
- its **Benjamini–Hochberg** q (Benjamini Y, Hochberg Y, J R Stat Soc B 1995;57:289–300): the
  false discovery rate — what findings across many slices need;

both from `statsmodels.stats.multitest.multipletests`, imported inside `adjust` (statsmodels
costs ~0.7 s to import; a run never adjusts anything). A test that is a suite's pre-registered
primary comparison (`primary_comparison: true`) is kept out of the family and decided alone.

The raw p of a drop is the one its interval stands for: the smallest α at which the two-sided
(1 − α) interval of baseline − candidate lies above 0 — so p ≤ 0.05 exactly when the 95% interval
that decides `regressed` excludes 0 on the drop side; 1 when the rate did not drop. For the
normal intervals (judge-corrected, over trials: estimate ± z·se) it is 2·Φ(−estimate/se);
otherwise the Newcombe hybrid score interval of the two pass rates (`assay.stats.newcombe_diff`)
is inverted by bisection. Slices are compared the same way on their counts
(docs/EVAL-METHODOLOGY.md, "Multiplicity").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from statistics import NormalDist
from typing import Final, Literal

from pydantic import BaseModel, Field

from assay.error_bars import Z95
from assay.regression import Comparison, RegressionStatus
from assay.stats import mcnemar_exact, newcombe_diff

ALPHA: Final = 0.05
"""The level a family is held to: family-wise (Holm) for regressions, false discovery (BH) for
slices."""

P_FLOOR: Final = 1e-15
"""The smallest p a Newcombe inversion resolves (the normal quantile of 1 − α/2 is not finite in
floating point below it): a smaller p is reported as this bound, which survives any family under
10^13 tests."""

_BISECTIONS: Final = 200
"""Halvings of [P_FLOOR, 1] in log space: far below 1e-15 relative width."""


Adjustment = Literal["holm", "fdr_bh"]
"""Holm's step-down (family-wise error) or Benjamini–Hochberg (false discovery rate)."""


class Scope(StrEnum):
    """What a test compares: a whole suite run, or one slice of it."""

    SUITE = "suite"
    TAG = "tag"
    CHECK_KIND = "check_kind"
    TURN = "turn"


class DropTest(BaseModel):
    """One regression test: a candidate's pass rate against its baseline's, and its figures."""

    id: str
    """`SUITE@VERSION · SUBJECT`, and `· tag:NAME`, `· check:KIND`, `· turn:N` for a slice."""
    scope: Scope
    run_id: str
    """The candidate run; for a pairwise slice, the comparison."""
    baseline_run: str | None
    """None for a pairwise slice: both sides are outputs of one comparison."""
    baseline: tuple[int, int]
    """Baseline passed, scored (pairwise: A's wins, judged pairs)."""
    candidate: tuple[int, int]
    """Candidate passed, scored (pairwise: B's wins, judged pairs)."""
    method: str
    """Which interval the raw p inverts."""
    raw_p: float
    regressed: bool
    """The decision at `ALPHA` alone: the run's recorded `regressed` status (suite scope), raw
    p ≤ `ALPHA` for a slice (pairwise: the two sides' wins differ)."""
    holm_p: float | None = None
    """Set by `adjust`; None for a test outside the family (a primary comparison)."""
    bh_q: float | None = None
    survives: bool | None = None
    """Set by `adjust`: regressed and Holm p ≤ α (suite tests), BH q ≤ α (slices); a primary
    comparison survives when it regressed."""


class Family(BaseModel):
    """Tests adjusted together, declared: which, how many, and how they are decided."""

    name: str
    """`regressions` (one test per suite job: Holm decides) or `slices` (BH decides)."""
    decided_by: Adjustment
    """Which adjusted figure `survives` reads."""
    alpha: float = ALPHA
    tests: list[DropTest] = Field(default_factory=list)
    excluded: list[DropTest] = Field(default_factory=list)
    """Pre-registered primary comparisons: reported, decided at α alone, not in the family."""

    @property
    def size(self) -> int:
        """How many tests the family holds (the primary comparisons left out)."""
        return len(self.tests)

    @property
    def surviving(self) -> list[DropTest]:
        """The family's tests that survive the adjustment."""
        return [test for test in self.tests if test.survives]

    @property
    def unadjusted(self) -> int:
        """The family's tests that would count at α alone."""
        return sum(test.regressed for test in self.tests)


def adjust(family: Family) -> Family:
    """The family with every test's Holm p, BH q and whether it survives (statsmodels)."""
    excluded = [test.model_copy(update={"survives": test.regressed}) for test in family.excluded]
    if not family.tests:
        return family.model_copy(update={"excluded": excluded})
    from statsmodels.stats.multitest import multipletests  # heavy: paid only when adjusting

    raw = [test.raw_p for test in family.tests]
    holm = multipletests(raw, alpha=family.alpha, method="holm")[1]
    bh = multipletests(raw, alpha=family.alpha, method="fdr_bh")[1]
    tests = []
    for test, holm_p, bh_q in zip(family.tests, holm, bh, strict=True):
        decisive = float(holm_p) if family.decided_by == "holm" else float(bh_q)
        survives = decisive <= family.alpha and (family.decided_by != "holm" or test.regressed)
        tests.append(
            test.model_copy(
                update={"holm_p": float(holm_p), "bh_q": float(bh_q), "survives": survives}
            )
        )
    return family.model_copy(update={"tests": tests, "excluded": excluded})


def wald_drop_p(mean_drop: float, se: float) -> float:
    """p of a drop whose interval is mean ± z·se: 2·Φ(−mean/se), 1 when it did not drop."""
    if mean_drop <= 0:
        return 1.0
    if se <= 0:
        return 0.0
    return min(1.0, 2.0 * NormalDist().cdf(-mean_drop / se))


def _normal_se(estimate: float, interval: Sequence[float]) -> float:
    """The se of a 95% interval estimate ± z·se clipped to [−1, 1], read from a side the clip
    left alone. Both clipped, the se is at least the one returned, so the p from it is a lower
    bound — above 2·Φ(−z/2) = 0.33, far from deciding anything."""
    lo, hi = interval
    if lo > -1.0:
        return (estimate - lo) / Z95
    return max(hi - estimate, 1.0 + estimate) / Z95


def newcombe_drop_p(baseline: tuple[int, int], candidate: tuple[int, int]) -> float:
    """p of the drop baseline − candidate pass rate under Newcombe's hybrid score interval: the
    α at which the lower limit of its (1 − α) interval is 0 (the limit rises with α); 1 when the
    rate did not drop; `P_FLOOR` when even that α leaves the limit above 0."""
    (bp, bn), (cp, cn) = baseline, candidate
    if not (bn and cn) or bp / bn - cp / cn <= 0:
        return 1.0

    def lower(alpha: float) -> float:
        interval = newcombe_diff(bp, bn, cp, cn, alpha)
        assert interval is not None  # both sides scored
        return interval.lo

    if lower(P_FLOOR) > 0:
        return P_FLOOR
    below, above = P_FLOOR, 1.0  # lower(below) <= 0 < lower(above)
    for _ in range(_BISECTIONS):
        middle = (below * above) ** 0.5
        if middle in (below, above):
            break
        if lower(middle) > 0:
            above = middle
        else:
            below = middle
    return above


def suite_test(test_id: str, run_id: str, comparison: Comparison) -> DropTest | None:
    """The regression test a run's comparison made; None without a baseline."""
    if comparison.baseline is None or comparison.baseline_run is None:
        return None
    baseline = (comparison.baseline.passed, comparison.baseline.scored)
    candidate = (comparison.candidate.passed, comparison.candidate.scored)
    corrected = comparison.judge_corrected
    if corrected is not None:
        method = "judge-corrected paired (PPI++), normal"
        raw_p = wald_drop_p(corrected.estimate, _normal_se(corrected.estimate, corrected.interval))
    elif comparison.trials is not None:
        method = "paired over trials, normal (Miller 2024)"
        raw_p = wald_drop_p(comparison.trials.mean_diff, comparison.trials.se)
    else:
        method = "Newcombe hybrid score, inverted"
        raw_p = newcombe_drop_p(baseline, candidate)
    return DropTest(
        id=test_id,
        scope=Scope.SUITE,
        run_id=run_id,
        baseline_run=comparison.baseline_run,
        baseline=baseline,
        candidate=candidate,
        method=method,
        raw_p=raw_p,
        regressed=comparison.status is RegressionStatus.REGRESSED,
    )


def slice_tests(
    test_id: str,
    run_id: str,
    baseline_run: str,
    scope: Scope,
    baseline: Mapping[str, tuple[int, int]],
    candidate: Mapping[str, tuple[int, int]],
) -> list[DropTest]:
    """One test per slice both runs scored (`{name: (passed, scored)}`), in name order."""
    tests = []
    for name in sorted(set(baseline) & set(candidate)):
        if not (baseline[name][1] and candidate[name][1]):
            continue
        raw_p = newcombe_drop_p(baseline[name], candidate[name])
        tests.append(
            DropTest(
                id=f"{test_id} · {_SLICE_PREFIX[scope]}{name}",
                scope=scope,
                run_id=run_id,
                baseline_run=baseline_run,
                baseline=baseline[name],
                candidate=candidate[name],
                method="Newcombe hybrid score, inverted",
                raw_p=raw_p,
                regressed=raw_p <= ALPHA,
            )
        )
    return tests


_SLICE_PREFIX: Final = {Scope.TAG: "tag:", Scope.CHECK_KIND: "check:", Scope.TURN: "turn:"}


def families(
    suite_tests: Sequence[tuple[DropTest, bool]], slices: Sequence[DropTest]
) -> tuple[Family, Family]:
    """The regressions family (each suite test, unless it is its suite's primary comparison:
    `(test, primary)`) and the slices family, both adjusted."""
    regressions = Family(
        name="regressions",
        decided_by="holm",
        tests=[test for test, primary in suite_tests if not primary],
        excluded=[test for test, primary in suite_tests if primary],
    )
    return adjust(regressions), adjust(Family(name="slices", decided_by="fdr_bh", tests=[*slices]))


def win_slices(
    test_id: str, comparison_id: str, wins: Mapping[str, tuple[int, int, int]]
) -> Family | None:
    """A pairwise comparison's slices (`{tag: (A's wins, B's wins, judged pairs)}`), each an
    exact two-sided sign test of A's wins against B's (ties and inconsistent pairs carry no
    sign; `assay.stats.mcnemar_exact`), adjusted as one family decided by BH; None without
    slices."""
    tests = []
    for name in sorted(wins):
        wins_a, wins_b, judged = wins[name]
        if not judged:
            continue
        raw_p = mcnemar_exact(wins_a, wins_b)
        tests.append(
            DropTest(
                id=f"{test_id} · {_SLICE_PREFIX[Scope.TAG]}{name}",
                scope=Scope.TAG,
                run_id=comparison_id,
                baseline_run=None,
                baseline=(wins_a, judged),
                candidate=(wins_b, judged),
                method="exact sign test, two-sided",
                raw_p=raw_p,
                regressed=raw_p <= ALPHA,
            )
        )
    return adjust(Family(name="slices", decided_by="fdr_bh", tests=tests)) if tests else None


def figure(value: float | None) -> str:
    """A p or q as printed: 12 significant digits, so the figures can be checked to 1e-9."""
    return "—" if value is None else f"{value:.12g}"


def summary(family: Family) -> str:
    """One line: the family declared (how many tests, how adjusted), and how many survive."""
    a = f"{family.alpha:g}"
    if family.decided_by == "holm":
        how = f"Holm, family-wise error {a}"
        outcome = (
            f"{family.unadjusted} regressed at {a} alone, {len(family.surviving)} survive Holm"
        )
    else:
        how = f"Benjamini–Hochberg, false discovery rate {a}"
        outcome = (
            f"{family.unadjusted} at p ≤ {a} alone, {len(family.surviving)} finding(s) with q ≤ {a}"
        )
    line = f"{family.name}: {family.size} test(s) adjusted together ({how}): {outcome}."
    if family.excluded:
        names = ", ".join(test.id for test in family.excluded)
        line += (
            f" Pre-registered primary comparison(s), left out and decided at {a} alone: {names}."
        )
    return line


def markdown(family: Family, sides: tuple[str, str] = ("baseline", "candidate")) -> str:
    """The family's heading, summary and one row per test (primary comparisons last, marked);
    `sides` name the two count columns."""
    lines = [
        f"### {family.name}",
        "",
        summary(family),
        "",
        f"| test | {sides[0]} | {sides[1]} | raw p | Holm p | BH q | at 0.05 alone | survives |",
        "|---|---:|---:|---:|---:|---:|---|---|",
    ]
    rows = [(test, "") for test in family.tests] + [(t, " (primary)") for t in family.excluded]
    for test, mark in rows:
        (bp, bn), (cp, cn) = test.baseline, test.candidate
        survives = "—" if test.survives is None else ("yes" if test.survives else "no")
        lines.append(
            f"| {test.id}{mark} | {bp}/{bn} | {cp}/{cn} | {figure(test.raw_p)} "
            f"| {figure(test.holm_p)} | {figure(test.bh_q)} "
            f"| {'yes' if test.regressed else 'no'} | {survives} |"
        )
    return "\n".join(lines)
