"""Findings: append-only records of things people must act on (SPEC §6).

A finding is derived from a run's EvalResult, so its key is deterministic
(`findings/<run_id>/<kind>.json`): re-running or retrying the reporting never duplicates one.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel

from assay.regression import RegressionStatus
from assay.runs import EvalResult
from assay.store import EvidenceStore


class Finding(BaseModel):
    """One finding: what kind, about which run, and the numbers behind it."""

    kind: str
    """`eval_regression` (later also `budget_blocked`, `judge_uncalibrated`, governance actions)."""
    run_id: str
    suite: str
    suite_version: int
    subject: str
    occurred_at: datetime
    summary: str
    details: dict[str, Any]


def _key(finding: Finding) -> str:
    return f"findings/{finding.run_id}/{finding.kind}.json"


def findings_for(result: EvalResult) -> list[Finding]:
    """The findings a finished run gives rise to."""
    regression = result.regression
    if regression is None or regression.status is not RegressionStatus.REGRESSED:
        return []
    assert regression.baseline is not None and regression.interval is not None
    subject = result.subject
    lo, hi = regression.interval
    summary = (
        f"{result.suite}@{result.suite_version} · {subject} regressed: pass rate "
        f"{regression.baseline.passed}/{regression.baseline.scored} → "
        f"{regression.candidate.passed}/{regression.candidate.scored} "
        f"(drop 95% CI {lo:.3f} to {hi:.3f}), score drop {regression.score_drop:.3f}"
    )
    return [
        Finding(
            kind="eval_regression",
            run_id=result.run_id,
            suite=result.suite,
            suite_version=result.suite_version,
            subject=subject,
            occurred_at=result.occurred_at,
            summary=summary,
            details=regression.model_dump(mode="json"),
        )
    ]


def record(store: EvidenceStore, finding: Finding) -> bool:
    """Write a finding once; returns False when it was already recorded."""
    return store.put_once_if_absent(_key(finding), finding.model_dump_json().encode())


def list_findings(store: EvidenceStore, run_id: str | None = None) -> list[Finding]:
    """Recorded findings, for one run or all."""
    prefix = f"findings/{run_id}/" if run_id else "findings/"
    return [Finding.model_validate_json(store.get(key)) for key in store.list(prefix)]
