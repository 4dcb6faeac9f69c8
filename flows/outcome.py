"""Outcome score: score the records → record each subject's governance action → notify → report.

The records travel by reference (a path or URI): Prefect records every flow parameter, so the
flow never receives response text. The report holds numbers only and is written once to the
evidence store as `outcomes/<report id>.json` (the id is this flow run's id).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from prefect import flow
from prefect.runtime import flow_run

from assay.outcome import OutcomeReport
from flows.launch import untagged_tasks
from tasks._store import store_reference
from tasks.findings import notify_findings
from tasks.outcome import (
    alerting,
    publish_outcome_artifact,
    record_governance,
    score_outcome_records,
)


def _run_name() -> str:
    records = str(flow_run.parameters["records"])
    return f"outcome · {PurePosixPath(records.rstrip('/')).name}"


@flow(name="outcome", flow_run_name=_run_name, persist_result=False, log_prints=False)
def outcome(
    records: str,
    contract: str | None = None,
    store: str | None = None,
    storage_block: str | None = None,
    judge_block: str | None = None,
    notification_block: str | None = None,
    fresh_judge: bool = False,
) -> OutcomeReport:
    """Score invocation records per subject on six dimensions and act on each subject's band.

    Args:
        records: Path or URI of the invocation records (a JSONL file or a folder of them).
        contract: Path of the outcome contract (weights, latency target, rubrics, partial
            rule, bands); default: the defaults, without a latency target.
        store: Evidence store URI; defaults to `ASSAY_STORE` or `file://.assay`.
        storage_block: Name of a saved EvidenceStorage block; takes precedence over `store`.
        judge_block: Name of a saved JudgeSettings block (default: `ASSAY_JUDGE_MODEL`,
            `OPENAI_API_KEY`, `OPENAI_BASE_URL`); its credentials also serve the embedder
            (`ASSAY_EMBEDDING_MODEL`).
        notification_block: Name of a saved NotificationTarget block: Marginal, Poor and
            Failing subjects' governance actions are sent through it.
        fresh_judge: Ignore cached verdicts and judge again.

    Returns:
        The report: per subject each dimension's mean with its coverage, the composite
        (complete, partial or incomplete), the band and its governance action.
    """
    with untagged_tasks():  # the flow run carries the tags
        store_uri = store_reference(store, storage_block)
        report = score_outcome_records(
            store_uri, records, contract, str(flow_run.id), judge_block, fresh_judge
        )
        findings = record_governance(store_uri, report)
        to_notify = alerting(findings)
        if notification_block and to_notify:
            notify_findings(notification_block, to_notify)
        publish_outcome_artifact(report)
        return report
