"""Events handed to the OpenTelemetry SDK and sent with its OTLP/HTTP log exporter.

Imported only when a run exports (`assay.telemetry.export`): a run with export off never loads
the SDK. Events are OpenTelemetry log records with an event name, emitted through the Logs SDK
(what the semantic conventions define an event to be); a traced case's record carries the
trace and span id of the case span it evaluates, which is how the conventions parent
`gen_ai.evaluation.result` to the evaluated operation.

Records are exported in batches, in this thread, through the exporter's own retries within its
timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`, 10 s by default). The first batch that fails stops the
export: an endpoint that does not answer costs one timeout, not one per batch. The exporter's
own log lines (a retry, a failure) are kept out of the run's log; the caller reports the
failure as one line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from opentelemetry import trace
from opentelemetry._logs import SeverityNumber
from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.sdk._logs import (
    LoggerProvider,
    LogRecordProcessor,
    ReadableLogRecord,
    ReadWriteLogRecord,
)
from opentelemetry.sdk._logs.export import LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from assay import __version__
from assay.telemetry.events import Event

BATCH_SIZE: Final = 512
"""Records per export request (the SDK batch processor's default)."""
SCOPE: Final = "assay"
EXPORTER_LOGGERS: Final = ("opentelemetry.exporter", "opentelemetry.sdk._logs")
EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class Sent:
    """How many records the endpoint accepted, and why it stopped taking them (None: all)."""

    accepted: int
    failure: str | None


class _Batches(LogRecordProcessor):
    """Exports emitted records `size` at a time, synchronously; after a failed batch it drops
    the rest rather than meet the same endpoint again."""

    def __init__(self, exporter: LogRecordExporter, size: int) -> None:
        self._exporter = exporter
        self._size = size
        self._pending: list[ReadableLogRecord] = []
        self.accepted = 0
        self.failed = False

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        if self.failed:
            return
        self._pending.append(
            ReadableLogRecord(
                log_record=log_record.log_record,
                resource=log_record.resource or Resource.get_empty(),
                instrumentation_scope=log_record.instrumentation_scope,
                limits=log_record.limits,
            )
        )
        if len(self._pending) >= self._size:
            self._send()

    def _send(self) -> None:
        batch, self._pending = self._pending, []
        if not batch or self.failed:
            return
        if self._exporter.export(batch) is LogRecordExportResult.SUCCESS:
            self.accepted += len(batch)
        else:
            self.failed = True

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self._send()
        return not self.failed

    def shutdown(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call]


class _Quiet(logging.Filter):
    """Keeps the exporter's own lines out of the run's log, remembering the last one's gist."""

    def __init__(self) -> None:
        super().__init__()
        self.last: str | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            self.last = record.getMessage()
        return False


@contextmanager
def _quiet_exporter() -> Iterator[_Quiet]:
    quiet = _Quiet()
    loggers = [logging.getLogger(name) for name in EXPORTER_LOGGERS]
    for logger in loggers:
        logger.addFilter(quiet)
    # A filter on a parent logger does not see its children's records: add it where they log.
    children = [
        logging.getLogger(name)
        for name in list(logging.root.manager.loggerDict)
        if name.startswith(EXPORTER_LOGGERS)
    ]
    for logger in children:
        logger.addFilter(quiet)
    try:
        yield quiet
    finally:
        for logger in loggers + children:
            logger.removeFilter(quiet)


def _parent(event: Event) -> Context | None:
    if event.link is None:
        return None
    context = SpanContext(
        trace_id=int(event.link.trace_id, 16),
        span_id=int(event.link.span_id, 16),
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(context))


def send(events: Iterable[Event], endpoint: str) -> Sent:
    """Emit every event as a log record and export them to `endpoint` (OTLP/HTTP protobuf;
    headers, timeout, TLS and compression from the standard `OTEL_EXPORTER_OTLP_*`
    variables)."""
    with _quiet_exporter() as quiet:
        batches = _Batches(OTLPLogExporter(endpoint=endpoint), BATCH_SIZE)
        provider = LoggerProvider(
            resource=Resource.create({"service.name": SCOPE, "service.version": __version__}),
            shutdown_on_exit=False,
        )
        provider.add_log_record_processor(batches)
        logger = provider.get_logger(SCOPE, __version__)
        try:
            for event in events:
                if batches.failed:
                    break
                logger.emit(
                    timestamp=(event.timestamp - EPOCH) // timedelta(microseconds=1) * 1000,
                    context=_parent(event),
                    severity_number=SeverityNumber.INFO,
                    attributes=dict(event.attributes),
                    event_name=event.name,
                )
            batches.force_flush()
        finally:
            provider.shutdown()
    failure = None
    if batches.failed:
        failure = f"the endpoint did not take the events ({quiet.last or 'no answer'})"
    return Sent(accepted=batches.accepted, failure=failure)
