"""The conversation figures (docs/conversations.md) against independent computations."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from assay.runs.metrics import tally
from assay.runs.scoring import CaseEvidence, TurnVerdict
from assay.scorers import Status

# conversations × turns: 1 pass, 0 fail, None skipped (unavailable after a missing turn)
GRID = [
    [1, 1, 1, 1],
    [1, 0, 1, 0],
    [1, 1, 0, None],
    [0, None, None, None],
    [1, 1, 1, 1],
    [1, 1, 1, 0],
    [0, 1, 1, 1],
    [1, 0, None, None],
]


def evidence() -> list[CaseEvidence]:
    cases = []
    for row, turns in enumerate(GRID):
        verdicts = [
            TurnVerdict(
                turn=j + 1,
                status=Status.SKIPPED if v is None else (Status.PASS if v else Status.FAIL),
                score=None if v is None else float(v),
                label="x",
            )
            for j, v in enumerate(turns)
        ]
        passed = all(v == 1 for v in turns)
        cases.append(
            CaseEvidence(
                case_id=f"c{row}",
                status=Status.PASS if passed else Status.FAIL,
                score=1.0 if passed else 0.0,
                output_hmac=None,
                label="x",
                checks=[],
                turns=verdicts,
            )
        )
    return cases


def test_turn_level_and_per_index_figures_equal_independent_computations() -> None:
    metrics = tally(evidence()[:3])
    metrics.merge(tally(evidence()[3:]))  # merged chunk by chunk, as a run does
    assert metrics.turns is not None
    # Conversation rate: Wilson over conversations.
    assert (metrics.passed, metrics.scored) == (2, 8)
    # Turn-level: Miller (2024) eq. 4 in numpy, conversations as clusters.
    values = np.array([v for row in GRID for v in row if v is not None], dtype=float)
    groups = np.array([i for i, row in enumerate(GRID) for v in row if v is not None])
    n, mean = len(values), values.mean()
    residuals = values - mean
    clt = (residuals**2).sum() / (n * (n - 1))
    cross = sum(
        residuals[groups == g].sum() ** 2 - (residuals[groups == g] ** 2).sum() for g in set(groups)
    )
    se = np.sqrt(clt + cross / n**2)
    estimate = metrics.turns.turn_rate()
    assert estimate is not None
    assert estimate.mean == pytest.approx(mean, abs=1e-6)
    assert estimate.se == pytest.approx(se, abs=1e-6)
    assert estimate.lo == pytest.approx(max(0.0, mean - 1.959963984540054 * se), abs=1e-6)
    assert metrics.turns.conversations == len(GRID)
    # Per turn index: Wilson over the conversations scored at that index.
    for index, scored, passed, interval in metrics.turns.by_turn():
        column = [row[index - 1] for row in GRID if row[index - 1] is not None]
        assert (scored, passed) == (len(column), sum(column))
        lo, hi = proportion_confint(passed, scored, method="wilson")
        assert interval is not None
        assert (interval.lo, interval.hi) == (
            pytest.approx(lo, abs=1e-6),
            pytest.approx(hi, abs=1e-6),
        )


def test_statsmodels_cluster_covariance_differs_only_by_the_clt_term() -> None:
    import statsmodels.api as sm

    metrics = tally(evidence())
    assert metrics.turns is not None
    estimate = metrics.turns.turn_rate()
    assert estimate is not None
    values = np.array([v for row in GRID for v in row if v is not None], dtype=float)
    groups = np.array([i for i, row in enumerate(GRID) for v in row if v is not None])
    fit = sm.OLS(values, np.ones_like(values)).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    n = len(values)
    squares = ((values - values.mean()) ** 2).sum()
    assert estimate.se**2 == pytest.approx(fit.bse[0] ** 2 + squares / (n**2 * (n - 1)), abs=1e-9)
