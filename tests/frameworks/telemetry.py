"""The real OpenTelemetry SDK for the framework recordings: its OTLP/HTTP exporters POST to a
tiny receiver started here, which keeps every raw body (`tests.frameworks.record` writes them)."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


class OtlpReceiver:
    """A tiny OTLP/HTTP receiver: keeps the raw body of every POST by path."""

    def __init__(self) -> None:
        self.bodies: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                with receiver._lock:
                    receiver.bodies.setdefault(self.path, []).append(body)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Telemetry:
    """The real OpenTelemetry SDK exporting to an `OtlpReceiver`, set as the global providers."""

    def __init__(self, setup: str) -> None:
        from opentelemetry import trace
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.exporter.otlp.proto.http import Compression
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.receiver = OtlpReceiver()
        resource = Resource.create({"service.name": f"assay-frameworks-{setup}"})
        self.tracer_provider = TracerProvider(resource=resource)
        span_exporter = OTLPSpanExporter(
            endpoint=f"{self.receiver.url}/v1/traces", compression=Compression.NoCompression
        )
        self.tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
        trace.set_tracer_provider(self.tracer_provider)
        self.logger_provider = LoggerProvider(resource=resource)
        log_exporter = OTLPLogExporter(
            endpoint=f"{self.receiver.url}/v1/logs", compression=Compression.NoCompression
        )
        self.logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
        set_logger_provider(self.logger_provider)
        self.tracer = trace.get_tracer("assay.frameworks.record")

    @contextmanager
    def case(self, case_id: str) -> Iterator[None]:
        """The root span of one case; flushes the exporters after it ends."""
        with self.tracer.start_as_current_span("case", attributes={"assay.case_id": case_id}):
            yield
        self.flush()

    def flush(self) -> None:
        self.tracer_provider.force_flush()
        self.logger_provider.force_flush()

    def shutdown(self) -> None:
        self.flush()
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.receiver.stop()

    def write(self, out: Path) -> dict[str, int]:
        """traces.pb/.json (always) and logs.pb/.json (when any); returns request counts."""
        from google.protobuf.json_format import MessageToJson
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        counts = {}
        kinds: tuple[tuple[str, str, Any], ...] = (
            ("traces", "/v1/traces", ExportTraceServiceRequest),
            ("logs", "/v1/logs", ExportLogsServiceRequest),
        )
        for name, path, message_type in kinds:
            bodies = self.receiver.bodies.get(path, [])
            counts[name] = len(bodies)
            if not bodies and name == "logs":
                continue
            (out / f"{name}.pb").write_bytes(b"".join(bodies))
            lines = [
                MessageToJson(message_type.FromString(body), indent=None) + "\n" for body in bodies
            ]
            (out / f"{name}.json").write_text("".join(lines), encoding="utf-8")
        return counts
