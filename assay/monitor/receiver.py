"""The OTLP/HTTP trace receiver, without the web framework: request bytes → stored signals → the
`ExportTraceServiceResponse` the OTLP specification asks for.

A request body (`application/x-protobuf` or `application/json`, optionally gzip-compressed) is
decoded into spans in memory; each finished root span becomes a `SessionSignal`; the signals of
one request are appended to the evidence store as one write-once JSON Lines object under
`signals/otlp/YYYY/MM/DD/HH/`. Nothing else of the request — no attribute, no span name, no
event, no exception message — is kept, logged or echoed. `assay monitor --from-store` and the
monitor flow read `signals/` (see `signals_reference`).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from uuid import uuid4

from assay.errors import InputError
from assay.monitor.signals import SessionSignal, SignalCounts, read_signals
from assay.monitor.spans import SIGNAL_ATTRIBUTES, PendingUsage, SignalBatch, session_signals
from assay.otel.traces import Span, decode_protobuf, json_spans
from assay.store import EvidenceStore

PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
SIGNALS_PREFIX: Final = "signals/"
OTLP_SIGNALS: Final = SIGNALS_PREFIX + "otlp/"


class UnsupportedMediaType(ValueError):
    """The request's content type or encoding is not one OTLP/HTTP defines."""


class MalformedRequest(ValueError):
    """The body cannot be decoded as an OTLP trace export; the message never quotes it."""


def media_type(content_type: str | None) -> str:
    """`application/x-protobuf` or `application/json` (parameters ignored); else 415."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind not in (PROTOBUF, JSON):
        raise UnsupportedMediaType(f"content type must be {PROTOBUF} or {JSON} (OTLP/HTTP traces)")
    return kind


def decompressed(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body after `Content-Encoding` (none or gzip), at most `limit` bytes."""
    kind = (encoding or "identity").strip().lower()
    if kind == "identity":
        return body
    if kind != "gzip":
        raise UnsupportedMediaType("content encoding must be gzip or none")
    reader = zlib.decompressobj(wbits=31)
    try:
        data = reader.decompress(body, limit + 1)
    except zlib.error:
        raise MalformedRequest("the body is not valid gzip") from None
    if len(data) > limit:
        raise MalformedRequest(f"the decompressed body is larger than {limit} bytes")
    return data


def decode(body: bytes, kind: str) -> list[Span]:
    """The spans of an export request in either OTLP encoding.

    Raises:
        MalformedRequest: the body is not a valid request (the reason names no value).
    """
    if kind == PROTOBUF:
        try:
            return decode_protobuf(body, SIGNAL_ATTRIBUTES)
        except ValueError as exc:
            raise MalformedRequest(str(exc)) from None
    try:
        return json_spans(body, "request body", 1, SIGNAL_ATTRIBUTES)
    except InputError as exc:
        where = f"{exc.field}: " if exc.field else ""
        raise MalformedRequest(f"{where}{exc.problem}") from None


@dataclass(frozen=True)
class Receipt:
    """What a request became: its signals (stored under `key`) and its rejected spans."""

    batch: SignalBatch
    key: str | None

    @property
    def error_message(self) -> str:
        """`N span(s): reason; …` — empty when nothing was rejected."""
        return "; ".join(f"{n} span(s): {reason}" for reason, n in self.batch.rejected.items())


def signals_key(moment: datetime) -> str:
    """A fresh write-once key for one request's signals, grouped by the hour they arrived."""
    at = moment.astimezone(UTC)
    return f"{OTLP_SIGNALS}{at:%Y/%m/%d/%H}/{at:%Y%m%dT%H%M%S%fZ}-{uuid4().hex}.jsonl"


def append_signals(store: EvidenceStore, batch: SignalBatch, moment: datetime) -> str | None:
    """Write the batch's signals as one new object; None when there are none."""
    if not batch.signals:
        return None
    key = signals_key(moment)
    lines = "".join(signal.model_dump_json(exclude_none=True) + "\n" for signal in batch.signals)
    store.put_once(key, lines.encode("utf-8"))
    return key


def receive(
    store: EvidenceStore,
    body: bytes,
    content_type: str | None,
    content_encoding: str | None,
    pending: PendingUsage,
    *,
    limit: int,
) -> Receipt:
    """Decode one OTLP/HTTP export request, append its session signals, and say what was kept.

    Only the attributes signals are made from (`SIGNAL_ATTRIBUTES`) are decoded; text attributes
    are skipped while decoding and go away with the request body.

    Raises:
        UnsupportedMediaType: not protobuf or JSON, or an encoding other than gzip.
        MalformedRequest: a body that is not a valid trace export.
        StoreUnavailableError: the store could not take the signals (the client should retry).
    """
    kind = media_type(content_type)
    spans = decode(decompressed(body, content_encoding, limit), kind)
    batch = session_signals(spans, pending)
    return Receipt(batch=batch, key=append_signals(store, batch, datetime.now(UTC)))


def response_body(receipt: Receipt, kind: str) -> bytes:
    """The `ExportTraceServiceResponse`, in the request's encoding; `partialSuccess` is set only
    when spans were rejected, as the specification asks."""
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceResponse,
    )

    response = ExportTraceServiceResponse()
    if receipt.batch.rejected_spans:
        response.partial_success.rejected_spans = receipt.batch.rejected_spans
        response.partial_success.error_message = receipt.error_message
    if kind == PROTOBUF:
        encoded: bytes = response.SerializeToString()
        return encoded
    text: str = MessageToJson(response, indent=None)
    return text.encode("utf-8")


def signals_reference(store: EvidenceStore) -> str:
    """Where the signals received by the OTLP endpoint live, as a URI `read_signals` takes."""
    return f"{store.uri.rstrip('/')}/{SIGNALS_PREFIX}"


def received_signals(store: EvidenceStore) -> tuple[list[SessionSignal], SignalCounts]:
    """The sessions the OTLP endpoint appended to `store`: none while it has received none (a
    monitor of a store that no agent has reached yet reports its expected subjects as silent,
    rather than failing on a missing folder)."""
    if next(iter(store.list(SIGNALS_PREFIX)), None) is None:
        return [], SignalCounts()
    return read_signals(signals_reference(store))
