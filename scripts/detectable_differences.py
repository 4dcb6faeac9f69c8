"""What a suite of n cases can detect: the tables in docs/EVAL-METHODOLOGY.md ("Honest limits").

1. Minimum detectable drop in pass rate between two independent runs of n cases each, at 80%
   power and two-sided α = 0.05 (the regression rule asks for the 95% interval of the drop to lie
   above 0), from statsmodels' power solver for two proportions (Cohen's h, arcsine transform):
   `NormalIndPower().solve_power(nobs1=n, alpha=0.05, power=0.8, ratio=1)` gives h, and the
   candidate's pass rate is p1 = sin(asin(√p0) − h/2)².
2. The same drop checked against Assay's own rule, exactly: the power of "Newcombe 95% interval
   lower bound > 0" (`assay.stats.newcombe_diff`'s method, statsmodels
   `confint_proportions_2indep(method="newcomb")`), summed over every binomial outcome of both
   runs — no simulation.
3. The 95% Wilson half-width of a single run's pass rate (`assay.stats.wilson`).
4. The chance that a run whose true pass rate is a little above the suite's `pass_threshold`
   lands below it (the gate compares the point estimate): `scipy.stats.binom.cdf`.

Usage: .venv/bin/python scripts/detectable_differences.py [--sizes 20 50 200] [--baselines 0.9 0.8]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from scipy.stats import binom  # type: ignore[import-untyped]
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from assay.stats import minimum_detectable_drop

ALPHA, POWER = 0.05, 0.80


def detectable_drop(n: int, p0: float) -> float:
    """The smallest drop from p0 that n-vs-n cases detect with 80% power (arcsine approximation;
    the figure every comparison reports as `regression.minimum_detectable_drop`)."""
    drop = minimum_detectable_drop(p0, n, n, alpha=ALPHA, power=POWER)
    assert drop is not None  # n > 0
    return drop


def rule_power(n: int, p0: float, p1: float) -> float:
    """Exact probability that Newcombe's 95% interval of (baseline − candidate) lies above 0."""
    x0, x1 = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    lo, _ = confint_proportions_2indep(
        x0.ravel(), n, x1.ravel(), n, method="newcomb", compare="diff", alpha=ALPHA
    )
    flagged = (np.asarray(lo) > 0).reshape(x0.shape)
    weights = np.outer(binom.pmf(np.arange(n + 1), n, p0), binom.pmf(np.arange(n + 1), n, p1))
    return float((weights * flagged).sum())


def wilson_half_width(n: int, p: float) -> float:
    lo, hi = proportion_confint(round(p * n), n, alpha=ALPHA, method="wilson")
    return float(hi - lo) / 2


def chance_below(n: int, true_rate: float, threshold: float) -> float:
    """P(passed / n < threshold) for a run of n cases whose true pass rate is `true_rate`."""
    below = math.ceil(threshold * n - 1e-9) - 1  # the largest count that falls short
    return float(binom.cdf(below, n, true_rate))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 50, 200])
    parser.add_argument("--baselines", type=float, nargs="+", default=[0.9, 0.8])
    parser.add_argument("--threshold", type=float, default=0.80)
    parser.add_argument("--true-rates", type=float, nargs="+", default=[0.85, 0.90])
    args = parser.parse_args()
    print("baseline  n/run  detectable drop  candidate  exact power of Assay's rule")
    for p0 in args.baselines:
        for n in args.sizes:
            drop = detectable_drop(n, p0)
            power = rule_power(n, p0, p0 - drop)
            print(f"{p0:8.2f}  {n:5d}  {drop:15.3f}  {p0 - drop:9.3f}  {power:27.2f}")
    print()
    print("pass rate  n  95% Wilson half-width")
    for p in args.baselines:
        for n in args.sizes:
            print(f"{p:9.2f}  {n:3d}  {wilson_half_width(n, p):21.3f}")
    print()
    print(f"true pass rate  n  chance the run's pass rate < {args.threshold:.2f}")
    for rate in args.true_rates:
        for n in args.sizes:
            print(f"{rate:14.2f}  {n:3d}  {chance_below(n, rate, args.threshold):.3f}")


if __name__ == "__main__":
    main()
