"""Monitor tasks: read the signals and write the report, record and announce findings, publish.

The signals travel by reference: one task reads them, computes the report and writes it, so no
signal line is ever a task argument or result — only the counts-only `MonitorReport`.
"""

from __future__ import annotations

from datetime import datetime

from prefect import task
from prefect.artifacts import create_markdown_artifact

from assay.findings import Finding, record
from assay.monitor.plan import SequencePlan, register_plan
from assay.monitor.receiver import received_signals, signals_reference
from assay.monitor.render import markdown_report
from assay.monitor.report import MonitorReport, assess, monitor_findings, save_report
from assay.monitor.signals import read_signals
from assay.monitor.thresholds import MonitorThresholds
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.findings import announce


@task(name="assess-signals", task_run_name="assess signals · {window}", **IO_RETRIES)
def assess_signals(
    store: str,
    signals: str | None,
    window: str,
    now: datetime,
    report_id: str,
    thresholds: MonitorThresholds,
    expect: list[str],
    plan: SequencePlan | None = None,
) -> MonitorReport:
    """Score the sessions in `signals` (None: those the store's OTLP endpoint received) over the
    window and write the report once; a retry whose first write landed returns that first
    report. A monitoring plan is registered (write-once) before anything is measured."""
    evidence = evidence_store(store)
    registered = register_plan(evidence, plan, report_id) if plan else None
    found, counts = read_signals(signals) if signals else received_signals(evidence)
    report = assess(
        found,
        counts,
        source=signals or signals_reference(evidence),
        window=window,
        now=now,
        report_id=report_id,
        thresholds=thresholds,
        expect=expect,
        plan=registered,
    )
    return save_report(evidence, report)


@task(name="report-monitor-findings", task_run_name="report-monitor-findings", **IO_RETRIES)
def report_monitor_findings(store: str, report: MonitorReport) -> list[Finding]:
    """Record one finding per alerting or silent subject (write-once) and announce each as an
    event."""
    findings = monitor_findings(report)
    target = evidence_store(store)
    for finding in findings:
        record(target, finding)
        announce(finding)
    return findings


def publish_monitor_artifact(report: MonitorReport) -> None:
    """The per-subject health table, with counts and the absence note, as markdown."""
    create_markdown_artifact(
        markdown=markdown_report(report),
        key="assay-monitor",
        description=(
            f"Session health per subject over {report.window}: completion, failure and "
            "high-severity rates (Wilson 95%), cost per completed session, tokens; no text."
        ),
    )
