"""The monitor flow: live-session signals → per-subject health report → findings → notify.

The signals file travels by reference (a path or URI parameter) and the report holds counts,
rates and states only; it is written once as `monitor/<report id>.json` (the id is this flow
run's id). An hourly deployment runs it over a sliding window (`deployments/prefect.yaml`).
"""

from __future__ import annotations

from datetime import UTC, datetime

from prefect.runtime import flow_run

from assay.monitor.options import MonitorOptions
from assay.monitor.report import MonitorReport
from assay.monitor.windows import utc
from flows._conventions import assay_flow
from tasks._store import store_reference
from tasks.findings import notify_findings
from tasks.monitor import assess_signals, publish_monitor_artifact, report_monitor_findings


def _run_name(options: MonitorOptions) -> str:
    """`monitor · 24h · <end of the window>`: `now` when given, else the clock."""
    end = utc(options.now) if options.now else datetime.now(UTC)
    return f"monitor · {options.window} · {end:%Y-%m-%d %H:%M} UTC"


@assay_flow(run_name=_run_name, verdict=None)
def monitor(options: MonitorOptions) -> MonitorReport:
    """Report session health per subject over [now − window, now) against the window before.

    Returns:
        The report: per subject, status (`ok`, `no_data`, `insufficient`, `alert`), state
        counts, rates with their denominators and intervals, cost, tokens, change and
        thresholds crossed; under a monitoring plan, each subject's confidence sequences and
        state (`degraded`, `holding`, `inconclusive`).
    """
    store_uri = store_reference(options.store, options.storage_block)
    report = assess_signals(
        store_uri,
        options.signals,
        options.window,
        options.now or datetime.now(UTC),
        str(flow_run.id),
        options.thresholds,
        options.expect,
        options.sequence,
    )
    publish_monitor_artifact(report)
    findings = report_monitor_findings(store_uri, report)
    if findings and options.notification_block:
        notify_findings(options.notification_block, findings)
    return report
