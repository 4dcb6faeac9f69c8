"""The OTLP receiver's domain (issue #18 part 2): real SDK spans, encoded by the SDK's own OTLP
encoder, become session signals; text is dropped; answers follow the OTLP specification."""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from assay.monitor.figures import window_stats
from assay.monitor.receiver import (
    JSON,
    PROTOBUF,
    MalformedRequest,
    UnsupportedMediaType,
    receive,
    received_signals,
    response_body,
    signals_reference,
)
from assay.monitor.signals import SignalCounts, read_signals
from assay.monitor.spans import PendingUsage
from assay.store import FileStore
from tests.otel_agent import CANARY, run_sessions

LIMIT = 1 << 20
SESSIONS = [(False, (100, 20), 0.01), (False, (300, 40), 0.03), (True, (50, 5), 0.002)]


def sdk_spans(
    sessions: Sequence[tuple[bool, tuple[int, int], float]] = SESSIONS,
    resource: dict[str, str] | None = None,
) -> Sequence[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create(
            resource or {"service.name": "support-bot", "service.version": "v2"}
        )
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    run_sessions(provider.get_tracer("agent"), sessions)
    provider.shutdown()
    return exporter.get_finished_spans()


def protobuf(spans: Sequence[ReadableSpan]) -> bytes:
    return encode_spans(spans).SerializeToString()


def everything_written(root: Path) -> str:
    return "\n".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


def test_root_spans_become_signals_and_no_text_is_stored(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "evidence")
    receipt = receive(store, protobuf(sdk_spans()), PROTOBUF, None, PendingUsage(), limit=LIMIT)

    assert receipt.batch.spans == 9 and receipt.batch.rejected_spans == 0
    assert receipt.key is not None and receipt.key.startswith("signals/otlp/")
    signals = sorted(receipt.batch.signals, key=lambda s: s.input_tokens or 0)
    assert [(s.state, s.input_tokens, s.output_tokens, s.cost_usd) for s in signals] == [
        ("failed", 50, 5, 0.002),
        ("completed", 100, 20, 0.01),
        ("completed", 300, 40, 0.03),
    ]
    assert {s.subject for s in signals} == {"agent:support-bot@v2"}
    assert all(s.started_at and s.ended_at and s.started_at <= s.ended_at for s in signals)
    assert all(len(s.session_id or "") == 32 for s in signals)

    written = everything_written(tmp_path / "evidence")
    assert CANARY not in written and "question" not in written
    found, counts = read_signals(signals_reference(store))
    assert counts.sessions == 3
    assert received_signals(store) == (found, counts)
    assert received_signals(FileStore(tmp_path / "untouched")) == ([], SignalCounts())
    stats = window_stats(found)
    assert (stats.completion.completed, stats.completion.n) == (2, 3)
    assert (stats.failure.failed, stats.failure.n) == (1, 3)
    assert response_body(receipt, PROTOBUF) == b""  # fully accepted: partial_success unset


def test_json_encoding_gives_the_same_signals(tmp_path: Path) -> None:
    spans = sdk_spans()
    as_json = MessageToJson(encode_spans(spans)).encode()
    by_json = receive(FileStore(tmp_path / "a"), as_json, JSON, None, PendingUsage(), limit=LIMIT)
    by_proto = receive(
        FileStore(tmp_path / "b"),
        protobuf(spans),
        f"{PROTOBUF}; charset=x",
        None,
        PendingUsage(),
        limit=LIMIT,
    )
    assert by_json.batch.signals == by_proto.batch.signals
    assert json.loads(response_body(by_json, JSON)) == {}


def test_children_sent_before_their_root_are_summed_into_its_signal(tmp_path: Path) -> None:
    spans = sdk_spans(SESSIONS[:1])
    children = [s for s in spans if s.parent is not None]
    roots = [s for s in spans if s.parent is None]
    pending = PendingUsage()
    store = FileStore(tmp_path / "evidence")
    first = receive(store, protobuf(children), PROTOBUF, None, pending, limit=LIMIT)
    assert first.batch.signals == [] and first.key is None
    second = receive(store, protobuf(roots), PROTOBUF, None, pending, limit=LIMIT)
    (signal,) = second.batch.signals
    assert (signal.input_tokens, signal.output_tokens, signal.cost_usd) == (100, 20, 0.01)


def test_bad_subjects_are_rejected_as_partial_success(tmp_path: Path) -> None:
    spans = sdk_spans(SESSIONS[:2], {"service.name": f"support bot {CANARY}"})
    receipt = receive(
        FileStore(tmp_path / "e"), protobuf(spans), PROTOBUF, None, PendingUsage(), limit=LIMIT
    )
    assert receipt.batch.signals == [] and receipt.batch.rejected_spans == 2
    response = ExportTraceServiceResponse.FromString(response_body(receipt, PROTOBUF))
    assert response.partial_success.rejected_spans == 2
    assert "agent:<service.name>@<service.version> must be KIND:ID" in (
        response.partial_success.error_message
    )
    assert CANARY not in response.partial_success.error_message
    as_json = json.loads(response_body(receipt, JSON))
    assert as_json["partialSuccess"]["rejectedSpans"] == "2"  # int64 as a string, per OTLP/JSON


def test_assay_subject_attribute_wins_over_the_service(tmp_path: Path) -> None:
    spans = sdk_spans(
        SESSIONS[:1],
        {"service.name": "svc", "service.version": "1", "assay.subject": "agent:bot@canary"},
    )
    receipt = receive(
        FileStore(tmp_path / "e"), protobuf(spans), PROTOBUF, None, PendingUsage(), limit=LIMIT
    )
    assert [s.subject for s in receipt.batch.signals] == ["agent:bot@canary"]


def test_gzip_bodies_are_accepted_and_bombs_refused(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "e")
    body = gzip.compress(protobuf(sdk_spans(SESSIONS[:1])))
    receipt = receive(store, body, PROTOBUF, "gzip", PendingUsage(), limit=LIMIT)
    assert len(receipt.batch.signals) == 1
    with pytest.raises(MalformedRequest, match="larger than"):
        receive(
            store,
            gzip.compress(b"\0" * (LIMIT + 10)),
            PROTOBUF,
            "gzip",
            PendingUsage(),
            limit=LIMIT,
        )
    with pytest.raises(UnsupportedMediaType):
        receive(store, body, PROTOBUF, "br", PendingUsage(), limit=LIMIT)


@pytest.mark.parametrize(
    ("body", "content_type", "error"),
    [
        (b"\xff\xff\xff not protobuf", PROTOBUF, MalformedRequest),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"', JSON, MalformedRequest),
        (f'{{"resourceSpans": "{CANARY}"}}'.encode(), JSON, MalformedRequest),
        (b"{}", "text/plain", UnsupportedMediaType),
        (b"{}", None, UnsupportedMediaType),
    ],
)
def test_undecodable_requests_are_refused_without_quoting_them(
    tmp_path: Path, body: bytes, content_type: str | None, error: type[Exception]
) -> None:
    store = FileStore(tmp_path / "e")
    with pytest.raises(error) as info:
        receive(store, body, content_type, None, PendingUsage(), limit=LIMIT)
    assert CANARY not in str(info.value)
    assert not (tmp_path / "e").exists()


def test_signals_land_in_hourly_write_once_objects(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "e")
    pending = PendingUsage()
    keys = {
        receive(store, protobuf(sdk_spans(SESSIONS[:1])), PROTOBUF, None, pending, limit=LIMIT).key
        for _ in range(3)
    }
    assert len(keys) == 3  # one new object per request, never appended to in place
    hour = datetime.now(UTC).strftime("%Y/%m/%d/%H")
    assert all(key and f"signals/otlp/{hour}/" in key for key in keys)


def test_monitor_takes_a_signals_source_or_the_store_not_both(
    store_dir: Path, prefect_api: str
) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    for args in ([], ["signals.jsonl", "--from-store"]):
        invoked = CliRunner().invoke(app, ["monitor", *args])
        assert invoked.exit_code == 2
        assert "give a SIGNALS file, folder or prefix, or --from-store (not both)" in (
            invoked.output
        )
    # A store no agent has reached yet: its expected subject is silent (no data), not an error.
    invoked = CliRunner().invoke(app, ["monitor", "--from-store", "--expect", "agent:quiet@v1"])
    assert invoked.exit_code == 0, invoked.output
    assert "agent:quiet@v1  no data  0 session(s)" in invoked.output


def test_findings_count_and_severity_attributes_reach_the_signal(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "bot"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("agent")
    for count, severity in ((2, "high"), (0, "high"), (1, CANARY)):
        with tracer.start_as_current_span("session") as span:
            span.set_attribute("assay.findings_count", count)
            span.set_attribute("assay.max_severity", severity)
    provider.shutdown()
    receipt = receive(
        FileStore(tmp_path / "e"),
        protobuf(exporter.get_finished_spans()),
        PROTOBUF,
        None,
        PendingUsage(),
        limit=LIMIT,
    )
    ((signal),) = receipt.batch.signals
    assert (signal.findings_count, signal.max_severity) == (2, "high")
    assert receipt.batch.rejected_spans == 2
    reasons = " | ".join(receipt.batch.rejected)
    assert "findings_count and max_severity disagree" in reasons
    assert "assay.max_severity: Input should be" in reasons and CANARY not in reasons


@pytest.mark.parametrize(
    "setup", ["agents-openinference", "agents-genai", "langgraph-openinference", "anthropic"]
)
def test_tokens_recorded_by_real_instrumentations_reach_the_monitor(
    tmp_path: Path, framework_recordings: dict[str, Path], setup: str
) -> None:
    """OpenInference's `llm.token_count.*` and the GenAI `gen_ai.usage.*` figures, as the real
    instrumentations export them, become the sessions' tokens."""
    from tests.frameworks.scenarios import EXPECTED

    body = (framework_recordings[setup] / "traces.pb").read_bytes()
    receipt = receive(FileStore(tmp_path), body, PROTOBUF, None, PendingUsage(), limit=LIMIT)
    assert receipt.batch.rejected_spans == 0
    totals = sum(s.input_tokens or 0 for s in receipt.batch.signals)
    sent = sum(turn[0] for case in EXPECTED.values() for turn in case["usage"])
    assert totals == sent  # every model call's prompt tokens, counted once
    assert all(s.input_tokens for s in receipt.batch.signals)
