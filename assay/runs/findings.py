"""The findings a finished suite run gives rise to: a regression, a budget that stopped judging;
and those a nightly's families of regression tests give rise to (`family_findings`).

Derived from the run's EvalResult only, so re-deriving them after a retry gives the same records
(and the same keys: `assay.findings`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from assay.findings import Adjusted, Finding, budget_finding
from assay.multiplicity import Family, Scope
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


def family_findings(
    family: Family, report: str, results: Mapping[str, EvalResult], occurred_at: datetime
) -> list[Finding]:
    """The findings a nightly's adjusted family gives rise to, each with its adjusted figures:
    every run that regressed at 5% alone (`family_regression`: whether it survives Holm), every
    slice whose BH q is at most 5% (`slice_regression`)."""
    found = []
    for test in family.tests:
        if test.holm_p is None or test.bh_q is None or test.survives is None:
            raise ValueError(f"family {family.name} is not adjusted")
        slice_ = test.scope is not Scope.SUITE
        if not (test.survives if slice_ else test.regressed):
            continue
        result = results[test.run_id]
        (bp, bn), (cp, cn) = test.baseline, test.candidate
        figure = (
            f"Holm p {test.holm_p:.4g}" if family.decided_by == "holm" else f"BH q {test.bh_q:.4g}"
        )
        verdict = "survives" if test.survives else "does not survive"
        found.append(
            Finding(
                kind="slice_regression" if slice_ else "family_regression",
                run_id=result.run_id,
                suite=result.suite,
                suite_version=result.suite_version,
                subject=result.subject,
                occurred_at=occurred_at,
                summary=f"{test.id}: pass rate {bp}/{bn} → {cp}/{cn}, raw p {test.raw_p:.4g}, "
                f"{figure} over {family.size} tests: {verdict} the family's 5%",
                details={"baseline_run": test.baseline_run, "method": test.method},
                adjusted=Adjusted(
                    family=family.name,
                    report=report,
                    family_size=family.size,
                    test=test.id,
                    raw_p=test.raw_p,
                    holm_p=test.holm_p,
                    bh_q=test.bh_q,
                    decided_by=family.decided_by,
                    survives=test.survives,
                ),
            )
        )
    return found
