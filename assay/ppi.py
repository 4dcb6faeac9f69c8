"""Prediction-powered inference (PPI++) of a mean: a few human labels, many judge verdicts.

The judge's pass rate over a run is biased by however often the judge disagrees with people.
PPI (Angelopoulos et al., Science 2023) corrects it with a labelled sample on which both the
human label `Y` and the judge's verdict `Ŷ` are known; PPI++ (Angelopoulos, Duchi & Zrnic,
arXiv:2311.01453) adds a power-tuning weight λ so the estimate is never worse than the
labelled mean alone:

    θ̂(λ) = λ · mean(Ŷᵤ) + mean(Y − λ · Ŷ)

with λ = Cov(Y, Ŷ) / ((1 + n/N) · Var(Ŷ ∪ Ŷᵤ)) clipped to [0, 1] (λ = 0 is the classical mean
of the labels, λ = 1 plain PPI), and the normal (z) interval with standard error
sqrt(Var(λŶᵤ)/N + Var(Y − λŶ)/n). These are the formulas of the reference implementation
`ppi_py.ppi_mean_pointestimate` / `ppi_mean_ci` with `lam=None` (covariance and variances with
its degrees of freedom: population variances in the standard error, the sample variance in λ),
which the tests compare against to 1e-9.

The one assumption: the labelled items are a random sample of the same kind of cases the judge
verdicts cover. Then the estimate is unbiased and the interval valid whatever the judge's errors.

`ppi_paired_difference` applies the same estimator to the per-case differences of two runs over
the cases both scored (docs/EVAL-METHODOLOGY.md, "Judge-corrected paired differences").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import norm  # type: ignore[import-untyped]


@dataclass(frozen=True)
class PpiMean:
    """A PPI++ estimate of a mean with its interval.

    Attributes:
        estimate: The prediction-powered estimate.
        lo: Lower bound of the interval, clipped to [0, 1] (the estimand is a rate).
        hi: Upper bound, likewise.
        lam: The power-tuning weight used, in [0, 1].
        labelled: n, items with a human label and a judge verdict.
        unlabelled: N, judge verdicts without a label.
        naive: The plain mean of the unlabelled verdicts (the judge's own pass rate).
    """

    estimate: float
    lo: float
    hi: float
    lam: float
    labelled: int
    unlabelled: int
    naive: float


def power_tuning(
    labels: np.ndarray, predictions: np.ndarray, unlabelled_predictions: np.ndarray
) -> float:
    """The variance-minimising λ of PPI++ for a mean, clipped to [0, 1].

    A constant judge (no variance in its verdicts) carries no information: λ is then 0.
    """
    n, big_n = len(labels), len(unlabelled_predictions)
    covariance = float(np.mean((labels - labels.mean()) * (predictions - predictions.mean())))
    variance = float(np.var(np.concatenate([predictions, unlabelled_predictions]), ddof=1))
    if variance == 0.0:
        return 0.0
    return float(np.clip(covariance / ((1 + n / big_n) * variance), 0.0, 1.0))


def _ppi(
    labels: np.ndarray, predictions: np.ndarray, unlabelled: np.ndarray, alpha: float
) -> tuple[float, float, float]:
    """(estimate, half-width of the (1 − alpha) z interval, λ) of PPI++ for a mean."""
    if labels.shape != predictions.shape or labels.ndim != 1:
        raise ValueError("labels and predictions must be two vectors of the same length")
    if len(labels) < 2 or len(unlabelled) < 1:
        raise ValueError("PPI needs at least 2 labelled items and 1 unlabelled verdict")
    lam = power_tuning(labels, predictions, unlabelled)
    estimate = float(lam * unlabelled.mean() + (labels - lam * predictions).mean())
    standard_error = float(
        np.sqrt(
            np.var(lam * unlabelled) / len(unlabelled)
            + np.var(labels - lam * predictions) / len(labels)
        )
    )
    return estimate, float(norm.ppf(1 - alpha / 2)) * standard_error, lam


def ppi_mean(
    labels: Sequence[float] | np.ndarray,
    predictions: Sequence[float] | np.ndarray,
    unlabelled_predictions: Sequence[float] | np.ndarray,
    alpha: float = 0.05,
) -> PpiMean:
    """The PPI++ estimate of the mean of `labels` and its (1 − alpha) interval.

    Args:
        labels: Y, the human labels of the labelled sample (1 pass, 0 fail).
        predictions: Ŷ, the judge's verdicts on the same items, in the same order.
        unlabelled_predictions: Ŷᵤ, the judge's verdicts on the cases to estimate over.
        alpha: 1 − coverage of the interval (0.05: 95%).

    Raises:
        ValueError: Fewer than two labelled items or no unlabelled ones, or `labels` and
            `predictions` of different lengths.
    """
    y_unlabelled = np.asarray(unlabelled_predictions, dtype=float)
    estimate, half_width, lam = _ppi(
        np.asarray(labels, dtype=float), np.asarray(predictions, dtype=float), y_unlabelled, alpha
    )
    return PpiMean(
        estimate=estimate,
        lo=max(0.0, estimate - half_width),
        hi=min(1.0, estimate + half_width),
        lam=lam,
        labelled=len(labels),
        unlabelled=len(y_unlabelled),
        naive=float(y_unlabelled.mean()),
    )


@dataclass(frozen=True)
class PairedArm:
    """One run's side of a paired PPI++ difference, every vector in the shared cases' order.

    Attributes:
        labels: Y, the human verdict (1 pass, 0 fail) of each labelled case's output in this run.
        predictions: Ŷ, this run's (judged) verdict of the same labelled cases.
        unlabelled: Ŷᵤ, this run's verdict of every shared case without a label pair.
    """

    labels: np.ndarray
    predictions: np.ndarray
    unlabelled: np.ndarray


def ppi_paired_difference(
    baseline: PairedArm, candidate: PairedArm, alpha: float = 0.05
) -> PpiMean:
    """The PPI++ estimate of the paired difference of pass rates, baseline − candidate.

    Per case the difference of the two runs' verdicts is one observation: d = Y_b − Y_c on the
    labelled cases (both outputs labelled by people), d̂ = Ŷ_b − Ŷ_c there and d̂ᵤ on the other
    shared cases; PPI++ of the mean of d (docs/EVAL-METHODOLOGY.md, "Judge-corrected paired
    differences"). One λ weighs both arms' verdicts, so the estimate is `ppi_py.ppi_mean_ci`
    applied to the differences. `lo` and `hi` are clipped to [−1, 1]; `naive` is the judge's own
    difference over the unlabelled cases.

    Raises:
        ValueError: Arms of different lengths, fewer than two labelled cases or no unlabelled.
    """
    if not (
        baseline.labels.shape == candidate.labels.shape
        and baseline.unlabelled.shape == candidate.unlabelled.shape
    ):
        raise ValueError("the two arms must hold the same cases")
    unlabelled = baseline.unlabelled.astype(float) - candidate.unlabelled.astype(float)
    estimate, half_width, lam = _ppi(
        baseline.labels.astype(float) - candidate.labels.astype(float),
        baseline.predictions.astype(float) - candidate.predictions.astype(float),
        unlabelled,
        alpha,
    )
    return PpiMean(
        estimate=estimate,
        lo=max(-1.0, estimate - half_width),
        hi=min(1.0, estimate + half_width),
        lam=lam,
        labelled=len(baseline.labels),
        unlabelled=len(unlabelled),
        naive=float(unlabelled.mean()),
    )
