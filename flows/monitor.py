"""The monitor flow: live-session signals → per-subject health report → findings → notify.

The signals file travels by reference (a path or URI parameter) and the report holds counts,
rates and states only; it is written once as `monitor/<report id>.json` (the id is this flow
run's id). An hourly deployment runs it over a sliding window (`deployments/prefect.yaml`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from prefect import flow
from prefect.runtime import flow_run

from assay.errors import InputError
from assay.monitor.report import MonitorReport
from assay.monitor.thresholds import MonitorThresholds
from assay.monitor.windows import parse_now, utc
from flows.launch import untagged_tasks
from tasks._store import store_reference
from tasks.findings import notify_findings
from tasks.monitor import assess_signals, publish_monitor_artifact, report_monitor_findings


def _run_name() -> str:
    """`monitor · 24h · <end of the window>`: the `now` parameter when given, else the clock."""
    parameters = flow_run.parameters
    end = _end(parameters.get("now"))
    return f"monitor · {parameters.get('window', '24h')} · {end:%Y-%m-%d %H:%M} UTC"


def _end(now: object) -> datetime:
    # A deployment run may carry `now` as its JSON text; a bad one is the flow's error to
    # report when it validates its parameters, not the run name's.
    if isinstance(now, datetime):
        return utc(now)
    if isinstance(now, str):
        try:
            return parse_now(now)
        except InputError:
            pass
    return datetime.now(UTC)


@flow(name="monitor", flow_run_name=_run_name, persist_result=False, log_prints=False)
def monitor(
    signals: str | None = None,
    window: str = "24h",
    now: datetime | None = None,
    expect: list[str] | None = None,
    thresholds: MonitorThresholds | None = None,
    store: str | None = None,
    storage_block: str | None = None,
    notification_block: str | None = None,
) -> MonitorReport:
    """Report session health per subject over [now − window, now) against the window before.

    Args:
        signals: Path or URI of a JSONL file, folder or `s3://` prefix of session signals
            (default: the signals `POST /v1/traces` appended to the evidence store).
        window: Window length: `30m`, `6h`, `24h`, `7d`.
        now: End of the window (default: when the flow runs).
        expect: Subjects (`KIND:ID[@VARIANT]`) that should be reporting; one without signals
            in the window is listed as no data and gives a `monitor_no_data` finding.
        thresholds: When a subject's figures give a `monitor_threshold` finding (defaults:
            `MonitorThresholds()`).
        store: Evidence store URI; defaults to `ASSAY_STORE` or `file://.assay`.
        storage_block: Name of a saved EvidenceStorage block; takes precedence over `store`.
        notification_block: Name of a saved NotificationTarget block that findings are sent to
            (its `finding_kinds` must include `monitor_threshold` and `monitor_no_data`, as the
            defaults do).

    Returns:
        The report: per subject, status (`ok`, `no_data`, `insufficient`, `alert`), state
        counts, rates with their denominators and intervals, cost, tokens, change and
        thresholds crossed.
    """
    with untagged_tasks():  # the flow run carries the tags
        store_uri = store_reference(store, storage_block)
        report = assess_signals(
            store_uri,
            signals,
            window,
            now or datetime.now(UTC),
            str(flow_run.id),
            thresholds or MonitorThresholds(),
            expect or [],
        )
        publish_monitor_artifact(report)
        findings = report_monitor_findings(store_uri, report)
        if findings and notification_block:
            notify_findings(notification_block, findings)
        return report
