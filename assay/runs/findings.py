"""The findings a finished suite run gives rise to: a regression, a budget that stopped judging.

Derived from the run's EvalResult only, so re-deriving them after a retry gives the same records
(and the same keys: `assay.findings`).
"""

from __future__ import annotations

from assay.findings import Finding, budget_finding
from assay.regression import RegressionStatus
from assay.runs.records import EvalResult


def findings_for(result: EvalResult) -> list[Finding]:
    """The findings a finished run gives rise to: a regression, a budget that stopped judging."""
    found = (
        []
        if result.budget is None
        else [
            budget_finding(
                result.budget,
                result.run_id,
                result.suite,
                result.suite_version,
                result.subject,
                result.occurred_at,
            )
        ]
    )
    return [f for f in (*found, _regression_finding(result)) if f is not None]


def _regression_finding(result: EvalResult) -> Finding | None:
    regression = result.regression
    if regression is None or regression.status is not RegressionStatus.REGRESSED:
        return None
    deciding = regression.deciding_interval
    assert regression.baseline is not None and deciding is not None
    subject = result.subject
    lo, hi = deciding
    summary = (
        f"{result.suite}@{result.suite_version} · {subject} regressed: pass rate "
        f"{regression.baseline.passed}/{regression.baseline.scored} → "
        f"{regression.candidate.passed}/{regression.candidate.scored} "
        f"(drop 95% CI {lo:.3f} to {hi:.3f}"
        f"{', paired over trials' if regression.trials else ''}), score drop "
        f"{regression.score_drop:.3f}"
    )
    return Finding(
        kind="eval_regression",
        run_id=result.run_id,
        suite=result.suite,
        suite_version=result.suite_version,
        subject=subject,
        occurred_at=result.occurred_at,
        summary=summary,
        details=regression.model_dump(mode="json"),
    )
