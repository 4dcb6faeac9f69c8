"""The service fails closed: no store write without a valid token, bounded reasons, no echo.

One `assay serve` (a real process on loopback, the session's Prefect API) serves the module;
tests measure what it wrote by the bytes of its file store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from assay.gate.overrides import MAX_REASON, audit_records
from assay.store import FileStore
from tests.api_service import Service, start_service

PROBLEM = "application/problem+json"
MEGABYTE_REASON = "a false alarm, trust me " + "x" * (1024 * 1024)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("closed"), prefect_api_url=prefect_api)
    try:
        yield running
    finally:
        running.stop()


def _store_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text[:500]
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    return body


def test_anonymous_megabyte_overrides_write_nothing_and_echo_nothing(service: Service) -> None:
    before = _store_bytes(service.store_dir)
    bodies = []
    for headers in ({}, {"Authorization": "Bearer assay_forged"}) * 2 + ({},):
        with service.client(headers=headers) as client:
            response = client.post(
                "/overrides", json={"run_id": "some-run", "reason": MEGABYTE_REASON}
            )
        bodies.append(response)
    assert _store_bytes(service.store_dir) == before
    for response in bodies:
        assert response.status_code in (401, 422), response.text[:300]
        assert "trust me" not in response.text and "xxxxxxxxxx" not in response.text
        assert len(response.content) < 2000
    with service.client() as client:
        short = client.post("/overrides", json={"run_id": "some-run", "reason": "trust me!"})
    assert "attempt" not in _problem(short, 401) and "trust me" not in short.text
    assert _store_bytes(service.store_dir) == before


def test_a_reason_over_the_limit_is_422_and_known_refusals_are_audited_without_echo(
    service: Service,
) -> None:
    with service.client("admin") as client:
        too_long = client.post(
            "/overrides", json={"run_id": "long-run", "reason": "r" * (MAX_REASON + 1)}
        )
    body = _problem(too_long, 422)
    assert body["field"] == "body.reason" and str(MAX_REASON) in body["detail"]
    assert "rrrrrrrrrr" not in too_long.text
    store = FileStore(service.store_dir)
    assert audit_records(store, "long-run") == []
    reason = "the upstream fixture is flaky today, TICKET-7"
    with service.client("viewer") as client:
        attempt = client.post("/overrides", json={"run_id": "v-run", "reason": reason})
    refused = _problem(attempt, 403)
    assert reason not in too_long.text and reason not in str(refused)
    assert refused["attempt"]["outcome"] == "refused" and "reason" not in refused["attempt"]
    assert [r.reason for r in audit_records(store, "v-run")] == [reason]


def test_a_suite_that_is_not_utf8_is_422_naming_the_line(service: Service) -> None:
    text = (
        b'{\n  "suite": "latin-1",\n  "cases": [{"id": "caf\xe9", "input": "q", "scorers": []}]\n}'
    )
    with service.client("operator") as client:
        published = client.post(
            "/suites", content=text, headers={"content-type": "application/json"}
        )
        listed = client.get("/suites").json()
    body = _problem(published, 422)
    assert "not UTF-8" in body["detail"] and body["line"] == 3
    assert "latin-1" not in [suite["suite"] for suite in listed]


def _otlp(value: Any) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"spans": [value]}]}]}


def test_an_otlp_document_nested_50000_deep_is_400_not_a_recursion_error(
    service: Service,
) -> None:
    deep = '{"resourceSpans": ' + "[" * 50_000 + "]" * 50_000 + "}"
    with service.client("operator") as client:
        response = client.post(
            "/v1/traces", content=deep, headers={"content-type": "application/json"}
        )
    body = _problem(response, 400)
    assert "nest" in body["detail"]


def test_identifiers_too_long_for_the_store_are_422_not_500(service: Service) -> None:
    long_key = "k" * 300
    with service.client("operator", headers={"Idempotency-Key": long_key}) as client:
        keyed = client.post("/runs", json={"suite": "s", "subject": "agent:a", "outputs": []})
    with service.client("operator") as client:
        subject = client.post(
            "/runs", json={"suite": "s", "subject": "agent:" + "a" * 5000, "outputs": []}
        )
        suite = client.post(
            "/runs", json={"suite": "s" * 5000, "subject": "agent:a", "outputs": []}
        )
    for response in (keyed, subject, suite):
        assert response.status_code in (404, 422), response.text[:300]
        assert "a" * 200 not in response.text and "s" * 200 not in response.text
