"""`assay serve` as CI drives it (issue 24): asynchronous runs followed live over SSE, per-case
results, the OpenAPI contract and its offline docs, and store faults answered as problems.

`assay serve` runs as a real process on the session's Prefect API, limited to one run at a time
with one queued, so admission is visible; every call goes over loopback with httpx.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from openapi_spec_validator import validate

from assay.store.s3 import S3Store
from tests.api_service import Service, example_outputs, example_suite, start_service
from tests.servers import BIN, RestartableS3Server, S3Server, free_port

PREFER_ASYNC = {"Prefer": "respond-async"}
PROBLEM = "application/problem+json"
LARGE = 30_000


def _large_suite() -> dict[str, Any]:
    cases = [
        {"id": f"c{i:05d}", "input": "q", "scorers": [{"contains": "yes"}]} for i in range(LARGE)
    ]
    return {"suite": "large", "pass_threshold": 0.5, "cases": cases}


def _large_outputs() -> list[dict[str, str]]:
    """Every third case answers "no": 10,000 failures, 20,000 passes."""
    return [{"case_id": f"c{i:05d}", "output": "no" if i % 3 == 0 else "yes"} for i in range(LARGE)]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Iterator[Service]:
    """One run at a time, one queued; `outputs_uri` reads go to an S3 endpoint that is down."""
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "ASSAY_S3_DEADLINE_SECONDS": "2",
    }
    running = start_service(
        tmp_path_factory.mktemp("serve-ci"),
        "--max-concurrent-runs",
        "1",
        "--max-queued-runs",
        "1",
        env=env,
        prefect_api_url=prefect_api,
    )
    with running.client("operator") as client:
        for document in (example_suite(), _large_suite()):
            published = client.post("/suites", json=document)
            assert published.status_code == 201, published.text
    try:
        yield running
    finally:
        running.stop()


def _small(version: str = "v2", subject: str = "agent:support-bot") -> dict[str, Any]:
    return {
        "suite": "support-bot",
        "subject": f"{subject}@{version}",
        "outputs": example_outputs(version),
    }


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["status"] == status and "Traceback" not in body["detail"]
    return body


def _wait_completed(client: httpx.Client, run_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"/runs/{run_id}")
        if response.status_code == 200:
            result: dict[str, Any] = response.json()
            return result
        assert response.status_code == 202, response.text
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not complete")


def test_a_30000_case_async_run_is_accepted_at_once_and_followed_live(service: Service) -> None:
    body = {"suite": "large", "subject": "agent:large@v1", "outputs": _large_outputs()}
    with service.client("operator") as client:
        client.post("/runs", json=_small("v1", "agent:warm-up"))  # the flow code is loaded
        started = time.perf_counter()
        accepted = client.post("/runs", json=body, headers=PREFER_ASYNC)
        accepted_in = time.perf_counter() - started
        assert accepted.status_code == 202, accepted.text
        state = accepted.json()
        run_id = state["run_id"]
        assert accepted.headers["location"] == f"/runs/{run_id}"
        assert accepted.headers["preference-applied"] == "respond-async"
        assert state["status"] in ("queued", "running") and state["chunks_done"] == 0
        # Admission holds for async runs: one running, one queued, the next refused.
        queued = client.post("/runs", json=_small("v1", "agent:queued"), headers=PREFER_ASYNC)
        refused = client.post("/runs", json=_small("v1", "agent:refused"), headers=PREFER_ASYNC)
        queued_state = client.get(f"/runs/{queued.json()['run_id']}")
    assert queued.status_code == 202 and queued.json()["status"] == "queued", queued.text
    assert queued_state.status_code == 202 and queued_state.json()["status"] == "queued"
    assert int(_problem(refused, 429)["status"]) == 429 and int(refused.headers["retry-after"]) >= 1

    with service.client("viewer") as viewer:
        # A client that leaves after a few frames costs the run nothing (checked below).
        with connect_sse(viewer, "GET", f"/runs/{run_id}/events") as source:
            for seen, _ in enumerate(source.iter_sse()):
                if seen == 3:
                    break
        events = []
        while_running: httpx.Response | None = None
        with connect_sse(viewer, "GET", f"/runs/{run_id}/events") as source:
            for event in source.iter_sse():
                if event.event == "case" and while_running is None:
                    while_running = viewer.get(f"/runs/{run_id}")
                events.append(event)
        ended = time.perf_counter()
        with connect_sse(
            viewer, "GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": "14999"}
        ) as source:
            resumed = list(source.iter_sse())
        queued_result = _wait_completed(viewer, queued.json()["run_id"])

    assert while_running is not None and while_running.status_code == 202
    assert while_running.json()["status"] == "running"
    cases = [event for event in events if event.event == "case"]
    progress = [event.json() for event in events if event.event == "progress"]
    assert [event.id for event in cases] == [str(i) for i in range(LARGE)]
    case_ids = [event.json()["case_id"] for event in cases]
    assert sorted(case_ids) == [f"c{i:05d}" for i in range(LARGE)], "every case exactly once"
    assert all(set(event.json()) == {"case_id", "status", "score", "label"} for event in cases)
    assert progress[-1]["chunks_done"] == progress[-1]["chunks"] == 15
    assert [p["chunks_done"] for p in progress] == sorted(p["chunks_done"] for p in progress)
    summary = events[-1]
    assert summary.event == "summary" and events.index(summary) == len(events) - 1
    result = summary.json()
    assert result["metrics"]["cases"] == LARGE
    assert (result["metrics"]["passed"], result["metrics"]["failed"]) == (20_000, 10_000)
    assert sum(event.json()["status"] == "pass" for event in cases) == 20_000
    assert [event.id for event in resumed[:-1]] == [str(i) for i in range(15_000, LARGE)]
    assert [event.data for event in resumed[:-1]] == [event.data for event in cases[15_000:]]
    assert resumed[-1].event == "summary"
    assert queued_result["metrics"]["cases"] == 50
    ran_for = ended - started
    print(f"202 after {accepted_in:.3f} s; the summary came {ran_for:.1f} s after the request")
    assert accepted_in < 1.0 and accepted_in < ran_for / 5, f"accepted after {accepted_in:.2f} s"


def test_an_async_request_is_checked_before_202_and_a_bad_output_fails_the_run(
    service: Service,
) -> None:
    bad_line = _small("v1", "agent:bad-line")
    bad_line["outputs"][2] = {"case_id": "no-such-case", "output": "x"}
    with service.client("operator") as client:
        no_suite = client.post("/runs", json={**_small(), "suite": "nope"}, headers=PREFER_ASYNC)
        no_baseline = client.post(
            "/gate", json={**_small(), "baseline": "no-such-run"}, headers=PREFER_ASYNC
        )
        bad_subject = client.post(
            "/runs", json={**_small(), "subject": "no-kind"}, headers=PREFER_ASYNC
        )
        accepted = client.post("/runs", json=bad_line, headers=PREFER_ASYNC)
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]
        deadline = time.monotonic() + 120
        while (shown := client.get(f"/runs/{run_id}")).status_code == 202:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        with connect_sse(client, "GET", f"/runs/{run_id}/events") as source:
            refused = source.response
    _problem(no_suite, 404)
    _problem(no_baseline, 404)
    _problem(bad_subject, 422)
    failed = _problem(shown, 409)
    assert failed["run_status"] == "failed"
    assert "outputs line 3" in failed["detail"] and "no-such-case" in failed["detail"]
    assert refused.status_code == 409


def test_an_async_run_with_an_idempotency_key_is_accepted_once(service: Service) -> None:
    headers = {**PREFER_ASYNC, "Idempotency-Key": "ci-build-77"}
    with service.client("operator") as client:
        first = client.post("/gate", json=_small("v2", "agent:idem"), headers=headers)
        again = client.post("/gate", json=_small("v2", "agent:idem"), headers=headers)
        other = client.post("/gate", json=_small("v1", "agent:idem"), headers=headers)
        result = _wait_completed(client, first.json()["run_id"])
        gate = client.get(f"/gates/{result['run_id']}")
    assert first.status_code == again.status_code == 202
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    _problem(other, 409)
    assert gate.status_code == 200 and gate.json()["recorded"] == "fail"
