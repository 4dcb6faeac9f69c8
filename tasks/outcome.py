"""Outcome score tasks: score a records file, act on each subject's band, publish the report.

The scoring task receives references (the records path, the contract path) and returns the
text-free `OutcomeReport`: response text lives only inside it, and nothing it returns is
persisted by Prefect (`NO_PERSISTENCE`).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from assay.findings import Finding, budget_finding, record
from assay.outcome import (
    ALERTING,
    OutcomeReport,
    governance_finding,
    load_contract,
    markdown_report,
    score_outcomes,
)
from blocks.judge_settings import judge_settings, judge_setup
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.artifacts import artifact_key
from tasks.findings import announce


@task(name="score-outcomes", task_run_name="score-outcomes", **IO_RETRIES)
def score_outcome_records(
    store: str,
    records: str,
    contract: str | None,
    report_id: str,
    judge_block: str | None = None,
    fresh_judge: bool = False,
) -> OutcomeReport:
    """Score every subject's records on the six dimensions and record the report (write-once).

    The judge (with its concurrency, prices and budgets) comes from `judge_setup`; the embedder
    (`ASSAY_EMBEDDING_MODEL`) from the same JudgeSettings, with its key, base URL and redaction
    (`JudgeSettings.embedder`; no judge configured: no embedder either). A retry finds the
    verdicts already paid for in the cache, and a retry after the report was written returns
    that report.
    """
    target = evidence_store(store)
    settings = load_contract(contract)
    setup = judge_setup(judge_block, fresh_judge)
    judge = judge_settings(judge_block)
    embedder, no_embedder = judge.embedder() if judge else (None, setup.skip_reason)
    try:
        report = score_outcomes(
            target,
            records,
            settings,
            setup,
            embedder,
            report_id=report_id,
            contract_path=contract,
            no_embedder_reason=no_embedder,
        )
    finally:
        if embedder is not None:
            embedder.close()
    logger = get_run_logger()
    for dimension, reasons in report.unavailable.items():
        listed = ", ".join(f"{reason}: {count}" for reason, count in reasons.items())
        logger.warning(
            "%s unavailable for %d record(s): %s", dimension, sum(reasons.values()), listed
        )
    return report


@task(name="record-governance", task_run_name="record-governance", **IO_RETRIES)
def record_governance(store: str, report: OutcomeReport) -> list[Finding]:
    """One `governance_action` Finding per subject with a band, and a `budget_blocked` (or
    `budget_alert`) Finding when a budget stopped (or flagged) judging: recorded write-once and
    announced as `finding.reported` events. Subjects whose composite is incomplete have no band,
    hence no action."""
    target = evidence_store(store)
    findings = [
        finding
        for outcome in report.subjects
        if (finding := governance_finding(outcome, report.report_id, report.occurred_at))
    ]
    if report.budget is not None:
        spending = budget_finding(
            report.budget, report.report_id, None, None, report.records, report.occurred_at
        )
        findings += [spending] if spending else []
    for finding in findings:
        record(target, finding)
        announce(finding)
    return findings


def alerting(findings: list[Finding]) -> list[Finding]:
    """The governance findings that also go to people: Marginal and below."""
    return [finding for finding in findings if finding.details.get("band") in ALERTING]


def publish_outcome_artifact(report: OutcomeReport) -> None:
    """The per-subject table (each dimension with its coverage, composite, band, action)."""
    create_markdown_artifact(
        markdown=markdown_report(report),
        key=artifact_key("assay-outcome", PurePosixPath(report.records.rstrip("/")).stem),
        description=(
            f"Outcome score of {len(report.subjects)} subject(s): six dimensions with coverage, "
            "composite, band and governance action; no response text."
        ),
    )
