"""A run's report: written once to the store (`reports/<run_id>.html`) and linked from the
flow run's artifacts.

When the link opens a service (`GET /runs/{id}/report`), the service builds the page on its
first request and keeps it (`assay.api.routes.reports`): the flow only marks it final
(`published_key`). Drawing its charts here, after the caller has its answer, cost the service
115–165 ms of CPU that the caller's next run waited behind (bench/README.md, "The fixed cost").
A link to the store object itself — no service to build it — finds the page written here.
"""

from __future__ import annotations

import os
from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_link_artifact

from assay import schemes
from assay.reports import REPORTS_URL_ENV, published_key, report_key
from assay.reports.link_key import report_link_key
from assay.reports.run import run_report
from assay.runs.records import load_result
from tasks._store import evidence_store
from tasks.artifacts import artifact_key

FILE_URI = "file://"

SERVICE_URL_ENV = "ASSAY_URL"
"""The service a command line talks to: with no `REPORTS_URL_ENV`, the link goes there."""


def report_link(store_uri: str, run_id: str, key: str | None = None) -> str:
    """Where a person opens the report from the Prefect UI: the service's `GET /runs/{id}/report`
    when its address is known (`REPORTS_URL_ENV`, which `assay serve` sets for its flows, else
    `ASSAY_URL`) — with the link's `key`, which opens it in a browser that sends no token —
    else the store object itself by an absolute URI (`file:///home/…/.assay/reports/ID.html`
    whichever folder the run started in, `s3://…`)."""
    service = report_service()
    if service:
        return f"{service}/runs/{run_id}/report" + (f"?key={key}" if key else "")
    location = f"{schemes.canonical_store(store_uri).rstrip('/')}/{report_key(run_id)}"
    if location.startswith(FILE_URI):
        return Path(location.removeprefix(FILE_URI)).as_uri()  # escaped: a link with a space
    return location


def report_service() -> str:
    """The service a report link opens (`REPORTS_URL_ENV`, else `ASSAY_URL`); empty: none."""
    return (os.environ.get(REPORTS_URL_ENV) or os.environ.get(SERVICE_URL_ENV, "")).rstrip("/")


@task(name="publish-report", task_run_name="publish-report", persist_result=False)
def publish_report(store: str, run_id: str) -> str | None:
    """Write the run's report unless one is there (a retry, or the gate after its suite-run),
    then link it from this flow run; returns the link. When the link opens a service, the page
    is left to it (built on the first request), and only marked final here.

    The run's verdict is recorded before this: a report that cannot be built is a warning in
    the run's log (no link, `assay report RUN_ID` to retry), never a failed run.
    """
    evidence = evidence_store(store)
    key = report_key(run_id)
    if report_service():
        evidence.put_once_if_absent(published_key(run_id), b"")
    elif not evidence.exists(key):
        try:
            page = run_report(evidence, run_id)
        except Exception as exc:
            get_run_logger().warning(
                "no report for run %s: %s: %s", run_id, type(exc).__name__, exc
            )
            return None
        evidence.put_once_if_absent(key, page.encode())
    result = load_result(evidence, run_id)
    link = report_link(evidence.uri, run_id, report_link_key(evidence, run_id))
    create_link_artifact(
        link=link,
        link_text=f"Report: {result.suite}@{result.suite_version} · {result.subject}",
        key=artifact_key("assay-report", result.suite, result.subject_id, result.variant or ""),
        description="The run's HTML report (verdict, charts, comparison, judge, every case's "
        "verdicts; no output text).",
    )
    return link
