"""Findings tasks: record them, announce them as Prefect events, send them to people."""

from __future__ import annotations

from typing import cast

from prefect import get_run_logger, task
from prefect.events import emit_event
from prefect.settings import PREFECT_UI_URL

from assay.findings import Finding, record
from assay.runs.findings import findings_for
from assay.runs.records import EvalResult
from blocks import NotificationTarget
from tasks._options import IO_RETRIES, NO_PERSISTENCE
from tasks._store import evidence_store


def announce(finding: Finding) -> None:
    """Emit `finding.reported`, best effort: an event failure never fails the run.

    The event's resource is the suite for suite-run findings, else the subject.
    """
    about = ("suite", finding.suite) if finding.suite else ("subject", finding.subject)
    try:
        emit_event(
            event="finding.reported",
            resource={
                "prefect.resource.id": f"assay.{about[0]}.{about[1]}",
                "prefect.resource.name": about[1],
            },
            related=[
                {
                    "prefect.resource.id": f"assay.run.{finding.run_id}",
                    "prefect.resource.role": "run",
                }
            ],
            payload=finding.model_dump(mode="json"),
        )
    except Exception as exc:  # events are a courtesy; the finding is already in the store
        get_run_logger().warning("could not emit finding.reported: %s", type(exc).__name__)


@task(name="report-findings", task_run_name="report-findings", **IO_RETRIES)
def report_findings(store: str, result: EvalResult) -> list[Finding]:
    """Record the run's findings (write-once) and announce each as a Prefect event."""
    findings = findings_for(result)
    target = evidence_store(store)
    for finding in findings:
        record(target, finding)
        announce(finding)
    return findings


def run_url(run_id: str) -> str | None:
    """Link to the run in the Prefect UI, when a UI URL is known."""
    base = PREFECT_UI_URL.value()
    return f"{base.rstrip('/')}/runs/flow-run/{run_id}" if base else None


@task(
    name="notify-findings",
    task_run_name="notify-findings",
    **{**NO_PERSISTENCE, "retries": 3, "retry_delay_seconds": [2, 5, 10]},
)
def notify_findings(notification_block: str, findings: list[Finding]) -> int:
    """Send findings through the NotificationTarget block; counts and links, never output text."""
    target = cast(NotificationTarget, NotificationTarget.load(notification_block))
    sent = 0
    for finding in findings:
        if finding.kind not in target.finding_kinds:
            continue
        link = run_url(finding.run_id)
        body = finding.summary + (f"\nRun: {link}" if link else f"\nRun id: {finding.run_id}")
        target.notify(subject=f"Assay finding: {finding.kind}", body=body)
        sent += 1
    return sent
