"""Outcome score: score the records → record each subject's governance action → notify → report.

The records travel by reference (a path or URI): Prefect records every flow parameter, so the
flow never receives response text. The report holds numbers only and is written once to the
evidence store as `outcomes/<report id>.json` (the id is this flow run's id).
"""

from __future__ import annotations

from pathlib import PurePosixPath

from prefect.runtime import flow_run

from assay.outcome import OutcomeReport
from assay.outcome.options import OutcomeOptions
from flows._conventions import assay_flow
from tasks._store import store_reference
from tasks.findings import notify_findings
from tasks.outcome import (
    alerting,
    publish_outcome_artifact,
    record_governance,
    score_outcome_records,
)


def _run_name(options: OutcomeOptions) -> str:
    return f"outcome · {PurePosixPath(options.records.rstrip('/')).name}"


@assay_flow(run_name=_run_name, verdict=None)
def outcome(options: OutcomeOptions) -> OutcomeReport:
    """Score invocation records per subject on six dimensions and act on each subject's band.

    Returns:
        The report: per subject each dimension's mean with its coverage, the composite
        (complete, partial or incomplete), the band and its governance action.
    """
    store_uri = store_reference(options.store, options.storage_block)
    report = score_outcome_records(
        store_uri,
        options.records,
        options.contract,
        str(flow_run.id),
        options.judge_block,
        options.fresh_judge,
    )
    findings = record_governance(store_uri, report)
    to_notify = alerting(findings)
    if options.notification_block and to_notify:
        notify_findings(options.notification_block, to_notify)
    publish_outcome_artifact(report)
    return report
