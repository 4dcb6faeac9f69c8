"""End to end (issue #18 part 3): an agent instrumented with the real OpenTelemetry SDK exports
through the real OTLP/HTTP protobuf exporter to a real `assay serve` process; the monitor reads
the signals from the store; a canary planted in every text attribute is nowhere."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    SimpleSpanProcessor,
    SpanExportResult,
)
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from assay.cli import app
from assay.gate.access import Tier, add_principal
from assay.store import FileStore
from tests.conftest import PREFECT_HOME
from tests.otel_agent import CANARY, run_sessions
from tests.servers import ServerProcess, free_port
from tests.test_minimal_data import _files_containing, _flush_prefect_logs, _prefect_database_dir

pytestmark = pytest.mark.usefixtures("prefect_api")

ASSAY = str(Path(sys.executable).with_name("assay"))
V2 = [(False, (100, 20), 0.01), (False, (300, 40), 0.03), (True, (50, 5), 0.002)]
V3 = [(True, (10, 1), 0.001), (True, (20, 2), 0.002)]


@dataclass
class Service:
    url: str
    log: Path
    operator: str
    viewer: str


@pytest.fixture
def service(
    store_dir: Path, tmp_path: Path, prefect_api: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Service]:
    """`assay serve` on a free port over a fresh store, with an operator and a viewer token."""
    store = FileStore(store_dir)
    admin = add_principal(store, "root", Tier.ADMIN)
    operator = add_principal(store, "agents", Tier.OPERATOR, by_token=admin)
    viewer = add_principal(store, "dashboards", Tier.VIEWER, by_token=admin)
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    port = free_port()
    log = tmp_path / "serve.log"
    process = ServerProcess(
        [ASSAY, "serve", "--port", str(port), "--store", f"file://{store_dir}"], port, log
    )
    process.start()
    try:
        yield Service(process.endpoint_url, log, operator, viewer)
    finally:
        process.stop()


def instrumented(resource: dict[str, str], batch_size: int) -> TracerProvider:
    """A tracer provider exporting OTLP/protobuf over HTTP as configured by the environment."""
    provider = TracerProvider(resource=Resource.create(resource))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(), max_export_batch_size=batch_size)
    )
    return provider


def test_instrumented_agent_feeds_the_monitor_and_no_text_is_kept(
    service: Service, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", service.url)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{service.operator}")
    started = datetime.now(UTC)

    v2 = instrumented({"service.name": "support-bot", "service.version": "v2"}, batch_size=512)
    run_sessions(v2.get_tracer("agent"), V2)
    assert v2.force_flush(timeout_millis=30_000)
    # Batches of 2: a root and its children reach the server in different requests.
    v3 = instrumented({"service.name": "support-bot", "service.version": "v3"}, batch_size=2)
    run_sessions(v3.get_tracer("agent"), V3)
    assert v3.force_flush(timeout_millis=30_000)
    v2.shutdown()
    v3.shutdown()

    # A viewer's token is refused, so its spans are not stored.
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", f"Authorization=Bearer%20{service.viewer}")
    captured = InMemorySpanExporter()
    probe = TracerProvider(resource=Resource.create({"service.name": "intruder"}))
    probe.add_span_processor(SimpleSpanProcessor(captured))
    run_sessions(probe.get_tracer("agent"), V3[:1])
    assert OTLPSpanExporter().export(captured.get_finished_spans()) is SpanExportResult.FAILURE

    now = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    invoked = CliRunner().invoke(
        app, ["monitor", "--from-store", "--window", "1h", "--now", now, "--json"]
    )
    assert invoked.exit_code == 0, invoked.output
    report = json.loads(invoked.stdout)
    subjects = {s["subject"]: s for s in report["subjects"]}
    assert set(subjects) == {"agent:support-bot@v2", "agent:support-bot@v3"}
    v2_health, v3_health = subjects["agent:support-bot@v2"], subjects["agent:support-bot@v3"]
    assert (v2_health["sessions"], v2_health["completion"]["completed"]) == (3, 2)
    assert (v2_health["failure"]["failed"], v2_health["failure"]["n"]) == (1, 3)
    cost = v2_health["cost_per_completed"]
    assert cost["value"] == pytest.approx((0.01 + 0.03 + 0.002) / 2) and cost["uncosted"] == 0
    assert v2_health["tokens"]["median"] == 120
    assert (v3_health["failure"]["failed"], v3_health["failure"]["n"]) == (2, 2)
    assert v3_health["tokens"]["median"] == pytest.approx((11 + 22) / 2)
    assert report["records"]["sessions"] == 5
    assert all(started <= datetime.fromisoformat(s["ended_at"]) for s in _stored_signals(store_dir))

    _flush_prefect_logs()
    needle = CANARY.encode()
    assert _files_containing(store_dir, needle) == []
    assert _files_containing(PREFECT_HOME, needle) == []
    assert _files_containing(_prefect_database_dir(), needle) == []
    assert needle not in service.log.read_bytes()
    assert CANARY not in invoked.output


def test_answers_follow_the_otlp_specification(service: Service) -> None:
    url = f"{service.url}/v1/traces"
    operator = {"Authorization": f"Bearer {service.operator}"}
    with httpx.Client(timeout=30) as client:
        refused = client.post(url, content=b"{}", headers={"Content-Type": "application/json"})
        assert refused.status_code == 401
        wrong_type = client.post(
            url, content=b"{}", headers={**operator, "Content-Type": "text/plain"}
        )
        assert wrong_type.status_code == 415
        assert wrong_type.headers["content-type"].startswith("application/problem+json")
        malformed = client.post(
            url,
            content=f'{{"resourceSpans": "{CANARY}"}}'.encode(),
            headers={**operator, "Content-Type": "application/json"},
        )
        assert malformed.status_code == 400 and CANARY not in malformed.text
        empty = client.post(
            url,
            content=b'{"resourceSpans": []}',
            headers={**operator, "Content-Type": "application/json"},
        )
        assert empty.status_code == 200 and empty.json() == {}
        assert empty.headers["content-type"].startswith("application/json")
        partial = client.post(
            url,
            content=json.dumps(_root_span_document("not a subject")).encode(),
            headers={**operator, "Content-Type": "application/json"},
        )
        assert partial.status_code == 200
        assert partial.json()["partialSuccess"]["rejectedSpans"] == "1"
        assert "assay.subject must be KIND:ID" in partial.json()["partialSuccess"]["errorMessage"]


def _root_span_document(subject: str) -> dict[str, object]:
    return {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "x"}}]
                },
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "name": "agent",
                                "startTimeUnixNano": "1780000000000000000",
                                "endTimeUnixNano": "1780000001000000000",
                                "attributes": [
                                    {"key": "assay.subject", "value": {"stringValue": subject}}
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }


def _stored_signals(store_dir: Path) -> list[dict[str, object]]:
    return [
        json.loads(line)
        for path in sorted((store_dir / "signals").rglob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
