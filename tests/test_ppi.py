"""PPI++ of a mean (`assay.ppi`) against the reference package `ppi_py` on fixed vectors."""

from __future__ import annotations

import numpy as np
import ppi_py
import pytest

from assay.ppi import ppi_mean

ALPHA = 0.05


def _reference(y: np.ndarray, y_hat: np.ndarray, unlabelled: np.ndarray) -> tuple[float, ...]:
    estimate = float(ppi_py.ppi_mean_pointestimate(y, y_hat, unlabelled, lam=None)[0])
    lo, hi = ppi_py.ppi_mean_ci(y, y_hat, unlabelled, alpha=ALPHA, lam=None)
    return estimate, float(lo[0]), float(hi[0])


def _binary(seed: int, n: int, big_n: int, agreement: float) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.7).astype(float)
    y_hat = np.where(rng.random(n) < agreement, y, 1 - y)
    unlabelled = (rng.random(big_n) < 0.75).astype(float)
    return y, y_hat, unlabelled


@pytest.mark.parametrize(
    ("seed", "n", "big_n", "agreement"),
    [(1, 40, 200, 0.9), (2, 30, 1000, 0.8), (3, 100, 150, 0.95), (4, 35, 5000, 0.6)],
)
def test_binary_verdicts_match_ppi_py(seed: int, n: int, big_n: int, agreement: float) -> None:
    y, y_hat, unlabelled = _binary(seed, n, big_n, agreement)
    ours = ppi_mean(y, y_hat, unlabelled, alpha=ALPHA)
    estimate, lo, hi = _reference(y, y_hat, unlabelled)
    assert 0.0 < lo < hi < 1.0  # clipping to [0, 1] is not engaged on these vectors
    assert ours.estimate == pytest.approx(estimate, abs=1e-9)
    assert ours.lo == pytest.approx(lo, abs=1e-9)
    assert ours.hi == pytest.approx(hi, abs=1e-9)
    assert 0.0 <= ours.lam <= 1.0
    assert (ours.labelled, ours.unlabelled) == (n, big_n)
    assert ours.naive == pytest.approx(unlabelled.mean())


def test_continuous_scores_match_ppi_py() -> None:
    rng = np.random.default_rng(7)
    y = rng.random(50)
    y_hat = np.clip(y + rng.normal(0, 0.1, 50), 0, 1)
    unlabelled = rng.random(400)
    ours = ppi_mean(y, y_hat, unlabelled, alpha=ALPHA)
    estimate, lo, hi = _reference(y, y_hat, unlabelled)
    assert (ours.estimate, ours.lo, ours.hi) == pytest.approx((estimate, lo, hi), abs=1e-9)


def test_lambda_is_clipped_to_zero_for_a_judge_that_disagrees() -> None:
    y = np.array([1, 0] * 20, dtype=float)
    y_hat = 1 - y  # always wrong: negative covariance, λ clipped to 0
    unlabelled = np.array([1, 0, 0] * 50, dtype=float)
    ours = ppi_mean(y, y_hat, unlabelled, alpha=ALPHA)
    estimate, lo, hi = _reference(y, y_hat, unlabelled)
    assert ours.lam == 0.0
    assert ours.estimate == pytest.approx(0.5)  # the labelled mean alone
    assert (ours.estimate, ours.lo, ours.hi) == pytest.approx((estimate, lo, hi), abs=1e-9)


def test_a_constant_judge_gives_the_labelled_mean_and_interval_bounds_stay_in_0_1() -> None:
    y = np.array([1.0] * 39 + [0.0])
    ours = ppi_mean(y, np.ones(40), np.ones(100))
    assert ours.lam == 0.0
    assert ours.estimate == pytest.approx(39 / 40)
    assert ours.hi == 1.0 and 0.0 < ours.lo < ours.estimate


def test_too_little_data_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least 2 labelled"):
        ppi_mean([1.0], [1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="same length"):
        ppi_mean([1.0, 0.0], [1.0], [1.0])
