"""Findings: append-only records of things people must act on (SPEC §6).

The record and its store layout; which findings a suite run gives rise to is
`assay.runs.findings`. A finding is derived from a run's EvalResult, so its key is deterministic
(`findings/<run_id>/<kind>.json`): re-running or retrying the reporting never duplicates one.
Findings without a suite (outcome and monitor reports, which cover many subjects) are keyed per
subject too: `findings/<report_id>/<kind>/<hash of the subject>.json`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from assay.canonical import content_hash
from assay.finops.budget import Decision
from assay.store import EvidenceStore


class Adjusted(BaseModel):
    """A finding's test in the family it was adjusted with (`assay.multiplicity`)."""

    family: str
    """`regressions` or `slices` of the report that adjusted it (`report`)."""
    report: str
    """The run that adjusted the family (a nightly's flow run id)."""
    family_size: int
    test: str
    """The test's id in its family, e.g. `support@3 · agent:bot@v2 · tag:returns`."""
    raw_p: float
    holm_p: float
    bh_q: float
    decided_by: Literal["holm", "fdr_bh"]
    """The figure held to 5%: Holm p or BH q."""
    survives: bool


class Finding(BaseModel):
    """One finding: what kind, about which run, and the numbers behind it."""

    kind: str
    """`eval_regression`, `budget_blocked`, `budget_alert`, `judge_uncalibrated`,
    `governance_action`, monitor thresholds, …"""
    run_id: str
    """The Assay run (or report) the finding belongs to; keys the finding."""
    suite: str | None = None
    """The suite, for findings about a suite run; None for outcome and monitor findings."""
    suite_version: int | None = None
    subject: str
    occurred_at: datetime
    summary: str
    details: dict[str, Any]
    adjusted: Adjusted | None = Field(default=None, exclude_if=lambda adjusted: adjusted is None)
    """A finding about one of many tests: its figures adjusted for the family; left out
    otherwise (a record without it keeps its bytes)."""


def _key(finding: Finding) -> str:
    if finding.adjusted is not None:
        # One run makes many tests in a family (its suite, its slices): one finding a test.
        test = content_hash(finding.adjusted.test).removeprefix("sha256:")[:16]
        return f"findings/{finding.run_id}/{finding.kind}/{test}.json"
    if finding.suite is None:
        # Outcome and monitor reports cover many subjects: one finding per subject and kind.
        subject = content_hash(finding.subject).removeprefix("sha256:")[:16]
        return f"findings/{finding.run_id}/{finding.kind}/{subject}.json"
    return f"findings/{finding.run_id}/{finding.kind}.json"


def record(store: EvidenceStore, finding: Finding) -> bool:
    """Write a finding once; returns False when it was already recorded."""
    return store.put_once_if_absent(_key(finding), finding.model_dump_json().encode())


def list_findings(store: EvidenceStore, run_id: str | None = None) -> list[Finding]:
    """Recorded findings, for one run or all."""
    prefix = f"findings/{run_id}/" if run_id else "findings/"
    return [Finding.model_validate_json(store.get(key)) for key in store.list(prefix)]


def matching_findings(
    store: EvidenceStore,
    suite: str | None = None,
    subject: str | None = None,
    kind: str | None = None,
    since: datetime | None = None,
) -> list[Finding]:
    """Recorded findings of `suite`, `subject` (`KIND:ID`: every variant; `KIND:ID@V`: that
    one), `kind`, at or after `since` (UTC when it has no zone), in store order."""
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return [
        finding
        for finding in list_findings(store)
        if (suite is None or finding.suite == suite)
        and (subject is None or subject in (finding.subject, finding.subject.split("@")[0]))
        and (kind is None or finding.kind == kind)
        and (since is None or finding.occurred_at >= since)
    ]


def budget_finding(
    decision: Decision,
    run_id: str,
    suite: str | None,
    suite_version: int | None,
    subject: str,
    occurred_at: datetime,
) -> Finding | None:
    """The finding a preflight decision gives rise to, if any (suite None outside suite runs).

    `blocked`, `throttled` and `refused` give a `budget_blocked` finding (spending stopped);
    `alert` gives a `budget_alert` finding (spending went ahead past a limit); `allowed` and
    `no_budget` give none. Findings are keyed per run and kind, so several blocked tasks of one
    run record one finding (the first).
    """
    if decision.status in ("blocked", "throttled", "refused"):
        kind = "budget_blocked"
        verb = (
            "judge spending refused" if decision.status == "refused" else "judge spending stopped"
        )
    elif decision.status == "alert":
        kind = "budget_alert"
        verb = "judge spending over budget (alert)"
    else:
        return None
    return Finding(
        kind=kind,
        run_id=run_id,
        suite=suite,
        suite_version=suite_version,
        subject=subject,
        occurred_at=occurred_at,
        summary=(f"{suite}@{suite_version} · " if suite else "")
        + f"{subject}: {verb}: {decision.reason}",
        details={
            "status": decision.status,
            "budget": decision.budget,
            "limit_usd": decision.limit_usd,
            "spent_usd": decision.spent_usd,
            "projected_usd": decision.projected_usd,
            "reason": decision.reason,
        },
    )
