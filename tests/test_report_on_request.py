"""A run the service ran has its report page built on the first request for it, then kept
(issue #36 item 5, "charts are drawn only when a report is written"): after answering, the flow
draws no charts — it marks the report final and links it — so back-to-back runs do not wait
behind the previous run's report. A real `assay serve` on the session's Prefect API."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from assay.reports import published_key, report_key
from assay.store import FileStore
from tests.api_service import example_outputs, example_suite, start_service

FLOW_END_SECONDS = 60.0


def _published_run(client: httpx.Client, store: FileStore, version: str) -> str:
    """A run of the example suite, once its flow has published its report."""
    ran = client.post(
        "/runs",
        json={
            "suite": "support-bot",
            "subject": f"agent:support-bot@{version}",
            "outputs": example_outputs(version),
        },
    )
    assert ran.status_code == 201, ran.text
    run_id: str = ran.json()["run_id"]
    deadline = time.monotonic() + FLOW_END_SECONDS
    while not store.exists(published_key(run_id)) and time.monotonic() < deadline:
        time.sleep(0.1)  # the flow publishes after it has answered
    assert store.exists(published_key(run_id))
    return run_id


def test_the_service_builds_a_run_s_report_on_first_request_and_keeps_it_once_final(
    tmp_path: Path, prefect_api: str
) -> None:
    service = start_service(tmp_path, prefect_api_url=prefect_api)
    store = FileStore(service.store_dir)
    try:
        with service.client("operator") as client:
            assert client.post("/suites", json=example_suite()).status_code == 201
            v1 = _published_run(client, store, "v1")
            assert not store.exists(report_key(v1))  # the flow drew no page

            first = client.get(f"/runs/{v1}/report")
            assert first.status_code == 200, first.text[:300]
            assert '<tr data-case-id="' in first.text
            assert store.get(report_key(v1)).decode() == first.text  # kept, write-once
            assert client.get(f"/runs/{v1}/report").text == first.text

            # Asked for before its flow publishes it (a gate still deciding on its suite run,
            # whose decision joins the page): served, not kept.
            v2 = _published_run(client, store, "v2")
            (service.store_dir / published_key(v2)).unlink()
            early = client.get(f"/runs/{v2}/report")
            assert early.status_code == 200 and v2 in early.text
            assert not store.exists(report_key(v2))
    finally:
        service.stop()
