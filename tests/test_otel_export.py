"""Results out as OpenTelemetry (issue #40 item 4): a run with `ASSAY_OTEL_EXPORT` sends one
`gen_ai.evaluation.result` per case and one `assay.evaluation.summary`, with the SDK's own OTLP
exporter, to a real OTLP/HTTP logs endpoint run here — with provenance, each traced case parented
to its case span, and never the output text."""

from __future__ import annotations

import gzip
import json
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from assay.judge.port import JudgePin
from assay.runs.chunks import read_cases
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite
from assay.telemetry.events import RESULT_EVENT, SUMMARY_EVENT
from assay.telemetry.export import SettingError, export_run, logs_endpoint
from tests.conftest import EXAMPLES
from tests.frameworks.fixtures import session_recordings  # noqa: F401 (a fixture)
from tests.judge_server import JudgeServer, verdict
from tests.otel_agent import CANARY, agent_traces, otlp_json
from tests.servers import free_port
from tests.test_admission import record_passing_admission

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Received:
    """One log record as the collector decoded it."""

    event_name: str
    attributes: dict[str, Any]
    trace_id: str
    span_id: str
    resource: dict[str, Any]


@dataclass
class Collector:
    """A real OTLP/HTTP logs endpoint: `POST /v1/logs`, protobuf `ExportLogsServiceRequest`
    (optionally gzip), answered with an `ExportLogsServiceResponse` — or `status` instead."""

    url: str
    bodies: list[bytes] = field(default_factory=list)
    records: list[Received] = field(default_factory=list)
    status: int = 200

    def events(self, name: str) -> list[Received]:
        return [record for record in self.records if record.event_name == name]


def _value(value: dict[str, Any]) -> Any:
    (kind, held), *_ = value.items()
    if kind == "arrayValue":
        return [_value(item) for item in held.get("values", [])]
    return int(held) if kind == "intValue" else held


def _attributes(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    return {pair["key"]: _value(pair["value"]) for pair in pairs}


def _decode(body: bytes) -> list[Received]:
    request = ExportLogsServiceRequest.FromString(body)
    found = []
    for resource_logs in request.resource_logs:
        resource = _attributes(MessageToDict(resource_logs.resource).get("attributes", []))
        for scope in resource_logs.scope_logs:
            for record in scope.log_records:
                as_dict = MessageToDict(record)
                found.append(
                    Received(
                        event_name=record.event_name,
                        attributes=_attributes(as_dict.get("attributes", [])),
                        trace_id=record.trace_id.hex(),
                        span_id=record.span_id.hex(),
                        resource=resource,
                    )
                )
    return found


@pytest.fixture
def collector() -> Iterator[Collector]:
    port = free_port()
    state = Collector(url=f"http://127.0.0.1:{port}")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            ok = self.path == "/v1/logs" and state.status == 200
            if ok:
                state.bodies.append(body)
                state.records.extend(_decode(body))
            answer = ExportLogsServiceResponse().SerializeToString() if ok else b""
            self.send_response(state.status if self.path == "/v1/logs" else 404)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    server.server_close()


def _outputs() -> list[dict[str, Any]]:
    """The example outputs, each answer carrying the canary."""
    path = EXAMPLES / "outputs" / "support-bot-v2.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{**row, "output": f"{row['output']} {CANARY}"} for row in rows]


@pytest.mark.usefixtures("prefect_api")
def test_a_traced_run_sends_one_result_per_case_and_a_summary_with_provenance_and_no_text(
    judge_env: JudgeServer,
    collector: Collector,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.launched import suite_run

    judge_env.script(default=verdict("pass", 0.9, reasoning=f"judged {CANARY}"))
    store = FileStore(store_dir)
    version, _ = registry.publish(store, load_suite(EXAMPLES / "support-suite.yaml"))
    spans = agent_traces(_outputs())
    traces = tmp_path / "traces.json"
    traces.write_text(otlp_json(spans))
    case_spans = {
        span.attributes["assay.case_id"]: (
            f"{span.context.trace_id:032x}",
            f"{span.context.span_id:016x}",
        )
        for span in spans
        if span.attributes and "assay.case_id" in span.attributes
    }
    monkeypatch.setenv("ASSAY_OTEL_EXPORT", collector.url)

    result = suite_run(suite=version.ref, outputs=str(traces), subject="agent:bot@v2")

    cases = list(read_cases(store, result.run_id))
    results = collector.events(RESULT_EVENT)
    (summary,) = collector.events(SUMMARY_EVENT)
    assert len(results) == len(cases) == result.metrics.cases == 50
    assert result.metrics.missing == 2  # two cases have no output, so no trace
    assert len(collector.records) == len(cases) + 1
    by_case = {r.attributes["assay.case.id"]: r for r in results}
    assert by_case.keys() == {case.case_id for case in cases}
    for case in cases:
        sent = by_case[case.case_id].attributes
        assert sent["gen_ai.evaluation.name"] == "support-bot"
        assert sent["gen_ai.evaluation.score.label"] == case.status.value
        assert sent["gen_ai.evaluation.explanation"] == case.label
        assert sent.get("gen_ai.evaluation.score.value") == case.score
        assert ("error.type" in sent) == (case.status.value == "error")
        assert sent["assay.run.id"] == result.run_id
        assert sent["assay.suite.name"] == "support-bot"
        assert sent["assay.suite.version"] == version.version
        assert sent["assay.subject"] == "agent:bot@v2"
        assert (sent["assay.evaluation.score.min"], sent["assay.evaluation.score.max"]) == (0, 1)
        assert sent["assay.scorer.names"] == sorted({c.kind or c.scorer for c in case.checks})
    # Each traced case is parented to its case span; the two cases without an output have none.
    linked = {case_id: (r.trace_id, r.span_id) for case_id, r in by_case.items() if r.trace_id}
    assert linked == {case_id: case_spans[case_id] for case_id in linked}
    assert len(linked) == len(case_spans) == 48
    judged = [r.attributes for r in results if "llm_judge" in r.attributes["assay.scorer.names"]]
    assert judged and result.judge is not None
    assert {(a["assay.judge.model"], a["assay.judge.prompt_version"]) for a in judged} == {
        (result.judge.model, result.judge.prompt_version)
    }
    assert {a["assay.judge.admission"] for a in judged} == {"never_admitted"}
    assert "assay.judge.model" not in next(
        r.attributes for r in results if "llm_judge" not in r.attributes["assay.scorer.names"]
    )
    facts = summary.attributes
    assert facts["assay.run.passed"] == result.passed
    assert facts["gen_ai.evaluation.score.label"] == ("passed" if result.passed else "not_passed")
    assert (facts["assay.run.results_exported"], facts["assay.run.results_linked"]) == (50, 48)
    assert (facts["assay.run.cases"], facts["assay.run.missing_cases"]) == (
        result.metrics.cases,
        result.metrics.missing,
    )
    assert summary.trace_id == ""
    assert summary.resource["service.name"] == "assay"
    received = b"".join(collector.bodies)
    assert CANARY.encode() not in received and b"private-text" not in received

    # The admission state is read from the admission records when the run exports.
    record_passing_admission(store, JudgePin(**result.judge.model_dump()))
    collector.records.clear()
    again = export_run(store, result)
    assert again is not None and again.warning is None and again.sent == 51
    admitted = [
        r.attributes for r in collector.events(RESULT_EVENT) if "assay.judge.model" in r.attributes
    ]
    assert {(a["assay.judge.admission"], a["assay.judge.admission_id"]) for a in admitted} == {
        ("admitted", "admitted-by-test")
    }


@pytest.mark.usefixtures("prefect_api")
def test_an_endpoint_that_does_not_answer_is_one_warning_and_the_verdict_stands(
    collector: Collector,
    store_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from tests.launched import suite_run

    store = FileStore(store_dir)
    version, _ = registry.publish(store, load_suite(EXAMPLES / "support-suite.yaml"))
    outputs = str(EXAMPLES / "outputs" / "support-bot-v2.jsonl")
    quiet = suite_run(suite=version.ref, outputs=outputs, subject="agent:bot@v2")
    closed = free_port()
    monkeypatch.setenv("ASSAY_OTEL_EXPORT", f"http://127.0.0.1:{closed}")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")

    caplog.clear()

    exporting = suite_run(suite=version.ref, outputs=outputs, subject="agent:bot@v2")

    assert (exporting.passed, exporting.verdict_reason) == (quiet.passed, quiet.verdict_reason)
    assert exporting.metrics.model_dump() == quiet.metrics.model_dump()
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and warned[0].startswith(
        f"OpenTelemetry export of run {exporting.run_id}"
    )
    caplog.clear()
    started = time.monotonic()
    outcome = export_run(store, exporting)
    assert time.monotonic() - started < 5
    assert outcome is not None and outcome.sent == 0 and outcome.warning is not None
    assert "\n" not in outcome.warning and f"127.0.0.1:{closed}/v1/logs" in outcome.warning
    assert "the run's result stands" in outcome.warning
    assert not [r for r in caplog.records if r.name.startswith("opentelemetry")]
    # A JSONL run's cases link to no trace; a refusing endpoint is the same one line.
    collector.status = 400
    monkeypatch.setenv("ASSAY_OTEL_EXPORT", "true")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url)
    refused = export_run(store, exporting)
    assert refused is not None and refused.warning and "400" in refused.warning
    collector.status = 200
    sent = export_run(store, exporting)
    assert sent is not None and sent.warning is None and (sent.results, sent.linked) == (50, 0)
    assert len(collector.events(RESULT_EVENT)) == 50
    assert not any(r.trace_id for r in collector.records)


def _case_spans(traces: Path) -> dict[str, list[tuple[int, str, str]]]:
    """Per case, each turn's `case` span as (start, trace id, span id) in start order, read
    with the OTLP protobuf classes from the recording's own export."""
    found: dict[str, list[tuple[int, str, str]]] = {}
    request = ExportTraceServiceRequest.FromString(traces.read_bytes())
    for resource_spans in request.resource_spans:
        for scope in resource_spans.scope_spans:
            for span in scope.spans:
                named = {a.key: a.value.string_value for a in span.attributes}
                if "assay.case_id" in named:
                    found.setdefault(named["assay.case_id"], []).append(
                        (span.start_time_unix_nano, span.trace_id.hex(), span.span_id.hex())
                    )
    return {case: sorted(turns) for case, turns in found.items()}


@pytest.mark.usefixtures("prefect_api")
def test_a_conversation_of_several_traces_links_its_first_turn_and_names_the_others(
    session_recordings: dict[str, Path],  # noqa: F811 (the fixture imported above)
    collector: Collector,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The OpenAI Agents SDK's conversations, one trace per user turn: each case's event is
    parented to its first turn's case span and carries the later turns' trace ids in
    `assay.trace_ids` (a log record has no links)."""
    from tests.launched import suite_run
    from tests.test_multi_trace_conversations import TRACES, _turns_suite

    recording = session_recordings["agents-openinference"]
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps(_turns_suite().document()))
    monkeypatch.setenv("ASSAY_OTEL_EXPORT", collector.url)

    run = suite_run(
        suite=str(suite), outputs=str(recording / "traces.pb"), subject="agent:sessions@v1"
    )

    turns = _case_spans(recording / "traces.pb")
    assert {case: len(spans) for case, spans in turns.items()} == TRACES
    results = {r.attributes["assay.case.id"]: r for r in collector.events(RESULT_EVENT)}
    assert results.keys() == TRACES.keys() and run.metrics.cases == len(TRACES)
    for case, ((_, trace_id, span_id), *later) in turns.items():
        assert (results[case].trace_id, results[case].span_id) == (trace_id, span_id)
        assert results[case].attributes["assay.trace_ids"] == [trace for _, trace, _ in later]
    (summary,) = collector.events(SUMMARY_EVENT)
    assert summary.attributes["assay.run.results_linked"] == len(TRACES)


def test_the_setting_names_the_endpoint() -> None:
    base = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/"}
    assert logs_endpoint({}) is None
    assert logs_endpoint({"ASSAY_OTEL_EXPORT": "false", **base}) is None
    assert logs_endpoint({"ASSAY_OTEL_EXPORT": "1"}) == "http://localhost:4318/v1/logs"
    assert logs_endpoint({"ASSAY_OTEL_EXPORT": "true", **base}) == "http://collector:4318/v1/logs"
    signal = {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "https://logs.example/ingest", **base}
    assert logs_endpoint({"ASSAY_OTEL_EXPORT": "TRUE", **signal}) == "https://logs.example/ingest"
    assert logs_endpoint({"ASSAY_OTEL_EXPORT": "https://otel.example:4318"}) == (
        "https://otel.example:4318/v1/logs"
    )
    assert logs_endpoint({"ASSAY_OTEL_EXPORT": "http://h:4318/v1/logs/"}) == "http://h:4318/v1/logs"
    with pytest.raises(SettingError, match="must be 1, true or an http"):
        logs_endpoint({"ASSAY_OTEL_EXPORT": "collector:4318"})


def test_a_bad_setting_is_a_warning_not_an_error() -> None:
    outcome = export_run(None, None, {"ASSAY_OTEL_EXPORT": "yes please"})  # type: ignore[arg-type]
    assert outcome is not None and outcome.sent == 0
    assert outcome.warning is not None and "ASSAY_OTEL_EXPORT must be" in outcome.warning


def test_export_off_imports_no_opentelemetry_sdk() -> None:
    code = (
        "import sys, assay.telemetry.export as e; "
        "assert e.export_run(None, None, {}) is None; "
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', "
        "'opentelemetry.exporter', 'assay.telemetry.sender'))))"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert ran.stdout.strip() == "[]"
