"""OTLP trace data decoded into a small typed span model (OTLP/JSON and OTLP/protobuf).

OTLP/JSON is decoded with pydantic models that accept both the spec's camelCase keys and
protobuf's field names, 64-bit integers as numbers or strings, enums as numbers or names, and
trace/span ids in hex (the OTLP/JSON spec, the Collector) or base64 (protobuf's own JSON
mapping, `MessageToJson`). Protobuf bodies are decoded with `opentelemetry-proto`. Both become
the same `Span`s. Errors name the document and the field path, never an attribute's value.

Attribute values stay in memory only as long as the caller holds the spans; nothing here writes.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from assay.errors import InputError
from assay.jsonl import numbered_lines

AttributeValue = str | bool | int | float | bytes | list[Any] | dict[str, Any] | None

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2
_STATUS_NAMES: Final = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_HEX: Final = re.compile(r"[0-9a-fA-F]*")
_DOCUMENT_START: Final = re.compile(rb'^\s*\{\s*"(resourceSpans|resource_spans)"')


def _alias(camel: str, snake: str) -> Any:
    return Field(default=None, validation_alias=AliasChoices(camel, snake))


def _int64(value: object) -> object:
    # OTLP/JSON writes 64-bit integers as decimal strings; the protobuf mapping accepts both.
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


Int64 = Annotated[int, BeforeValidator(_int64)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class _ArrayValue(_Wire):
    values: list[_AnyValue] = []


class _KeyValueList(_Wire):
    values: list[_KeyValue] = []


class _AnyValue(_Wire):
    string_value: str | None = _alias("stringValue", "string_value")
    bool_value: bool | None = _alias("boolValue", "bool_value")
    int_value: Int64 | None = _alias("intValue", "int_value")
    double_value: float | None = _alias("doubleValue", "double_value")
    bytes_value: str | None = _alias("bytesValue", "bytes_value")
    array_value: _ArrayValue | None = _alias("arrayValue", "array_value")
    kvlist_value: _KeyValueList | None = _alias("kvlistValue", "kvlist_value")

    def plain(self) -> AttributeValue:
        """The value as plain Python (arrays as lists, key-value lists as dicts)."""
        if self.array_value is not None:
            return [item.plain() for item in self.array_value.values]
        if self.kvlist_value is not None:
            return _plain_attributes(self.kvlist_value.values)
        if self.bytes_value is not None:
            return base64.b64decode(self.bytes_value)
        for value in (self.string_value, self.bool_value, self.int_value, self.double_value):
            if value is not None:
                return value
        return None


class _KeyValue(_Wire):
    key: str
    value: _AnyValue | None = None


def _plain_attributes(
    pairs: list[_KeyValue], keys: Collection[str] | None = None
) -> dict[str, AttributeValue]:
    return {
        pair.key: pair.value.plain() if pair.value else None
        for pair in pairs
        if keys is None or pair.key in keys
    }


def _status_code(value: object) -> object:
    return _STATUS_NAMES.get(value, value) if isinstance(value, str) else value


class _Status(_Wire):
    code: Annotated[int, BeforeValidator(_status_code)] = STATUS_UNSET


class _Span(_Wire):
    trace_id: str = Field(validation_alias=AliasChoices("traceId", "trace_id"))
    span_id: str = Field(validation_alias=AliasChoices("spanId", "span_id"))
    parent_span_id: str | None = _alias("parentSpanId", "parent_span_id")
    start_time_unix_nano: Int64 = Field(
        default=0, validation_alias=AliasChoices("startTimeUnixNano", "start_time_unix_nano")
    )
    end_time_unix_nano: Int64 = Field(
        default=0, validation_alias=AliasChoices("endTimeUnixNano", "end_time_unix_nano")
    )
    attributes: list[_KeyValue] = []
    status: _Status = _Status()


class _Resource(_Wire):
    attributes: list[_KeyValue] = []


class _ScopeSpans(_Wire):
    spans: list[_Span] = []


class _ResourceSpans(_Wire):
    resource: _Resource = _Resource()
    scope_spans: list[_ScopeSpans] = Field(
        default=[], validation_alias=AliasChoices("scopeSpans", "scope_spans")
    )


class TracesDocument(_Wire):
    """One OTLP/JSON `TracesData` / `ExportTraceServiceRequest` document."""

    resource_spans: list[_ResourceSpans] = Field(
        validation_alias=AliasChoices("resourceSpans", "resource_spans")
    )


@dataclass(frozen=True, slots=True)
class Span:
    """One span, decoded: ids in lower-case hex, times in Unix nanoseconds, plain attributes."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    """None for a root span."""
    start_ns: int
    end_ns: int
    status_code: int
    attributes: Mapping[str, AttributeValue]
    resource: Mapping[str, AttributeValue]
    where: str
    """The span's position in its document, e.g. `resourceSpans[0].scopeSpans[1].spans[3]`."""

    @property
    def is_root(self) -> bool:
        return self.parent_span_id is None

    @property
    def duration_ms(self) -> float | None:
        """End minus start in milliseconds; None when either is missing or they are reversed."""
        if not self.start_ns or not self.end_ns or self.end_ns < self.start_ns:
            return None
        return (self.end_ns - self.start_ns) / 1e6

    def attribute(self, name: str) -> AttributeValue:
        """`name` on the span, else on its resource."""
        value = self.attributes.get(name)
        return self.resource.get(name) if value is None else value


def decode_id(value: str | bytes | None, size: int, field: str) -> str | None:
    """A trace (16 bytes) or span (8 bytes) id given in hex or base64 → lower-case hex.

    An empty or all-zero id is None (OTLP's "no parent"). Raises ValueError naming `field`.
    """
    if not value:
        return None
    if isinstance(value, bytes):
        raw = value
    elif len(value) == 2 * size and _HEX.fullmatch(value):
        raw = bytes.fromhex(value)
    else:
        try:
            raw = base64.b64decode(value, validate=True)
        except binascii.Error:
            raw = b""
    if len(raw) != size:
        raise ValueError(f"{field}: not a {size}-byte id in hex or base64")
    return None if raw == bytes(size) else raw.hex()


def document_spans(
    document: TracesDocument, source: str, line: int, keys: Collection[str] | None = None
) -> Iterator[Span]:
    """The spans of one OTLP/JSON document; a malformed id is an input error naming the span.

    With `keys`, only those attributes are kept (the others are never converted).
    """
    for r, resource_spans in enumerate(document.resource_spans):
        resource = _plain_attributes(resource_spans.resource.attributes, keys)
        for s, scope in enumerate(resource_spans.scope_spans):
            for n, span in enumerate(scope.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                try:
                    trace_id = decode_id(span.trace_id, 16, "traceId")
                    span_id = decode_id(span.span_id, 8, "spanId")
                    parent = decode_id(span.parent_span_id, 8, "parentSpanId")
                except ValueError as exc:
                    raise InputError(source, str(exc), line=line, field=where) from None
                if trace_id is None or span_id is None:
                    raise InputError(source, "span without an id", line=line, field=where)
                yield Span(
                    trace_id=trace_id,
                    span_id=span_id,
                    parent_span_id=parent,
                    start_ns=span.start_time_unix_nano,
                    end_ns=span.end_time_unix_nano,
                    status_code=span.status.code,
                    attributes=_plain_attributes(span.attributes, keys),
                    resource=resource,
                    where=where,
                )


def parse_document(raw: bytes, source: str, line: int) -> TracesDocument:
    """Validate one OTLP/JSON document; errors name source, line and field, never a value."""
    try:
        return TracesDocument.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False, include_context=False)[0]
        if first["type"] == "json_invalid":
            raise InputError(source, f"malformed JSON ({_json_position(raw)})", line=line) from None
        field = ".".join(str(step) for step in first["loc"]) or None
        raise InputError(source, first["msg"], line=line, field=field) from None


def _json_position(raw: bytes) -> str:
    try:
        json.loads(raw)
    except json.JSONDecodeError as exc:
        return f"document line {exc.lineno}, column {exc.colno}"
    except UnicodeDecodeError:
        return "not UTF-8 text"
    return "unreadable"


def looks_like_traces(head: bytes) -> bool:
    """Whether a file's first bytes open an OTLP/JSON traces document."""
    return _DOCUMENT_START.match(head) is not None


@dataclass(frozen=True, slots=True)
class Document:
    """Where one OTLP/JSON document lies in its file: bytes [start, end), first line `line`."""

    line: int
    start: int
    end: int
    raw: bytes


def documents(blocks: Iterator[bytes]) -> Iterator[Document]:
    """The documents of a trace export: JSON Lines of documents (the Collector's file exporter),
    or one document, possibly spread over many lines (`MessageToJson`, `json.dump(indent=…)`)."""
    lines = numbered_lines(blocks)
    first = next(lines, None)
    if first is None:
        return
    number, start, end, raw = first
    if raw.startswith(b"{") and raw.endswith(b"}"):
        yield Document(number, start, end, raw)
        for number, start, end, raw in lines:
            yield Document(number, start, end, raw)
        return
    # A document over many lines: the whole file is that document.
    parts = [raw]
    for _number, _start, end, raw in lines:  # noqa: B007 - `end` is the last line's end
        parts.append(raw)
    yield Document(number, start, end, b"\n".join(parts))


def decode_protobuf(body: bytes, keys: Collection[str] | None = None) -> list[Span]:
    """The spans of an OTLP/protobuf `ExportTraceServiceRequest`; with `keys`, only those
    attributes are kept (the others are never converted).

    Raises:
        ValueError: the body is not a valid message.
    """
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError:
        raise ValueError("not an OTLP ExportTraceServiceRequest") from None
    spans: list[Span] = []
    for r, resource_spans in enumerate(request.resource_spans):
        resource = _proto_attributes(resource_spans.resource.attributes, keys)
        for s, scope in enumerate(resource_spans.scope_spans):
            for n, span in enumerate(scope.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{n}]"
                trace_id = decode_id(span.trace_id, 16, f"{where}.traceId")
                span_id = decode_id(span.span_id, 8, f"{where}.spanId")
                if trace_id is None or span_id is None:
                    raise ValueError(f"{where}: span without an id")
                spans.append(
                    Span(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=decode_id(span.parent_span_id, 8, f"{where}.parentSpanId"),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        status_code=span.status.code,
                        attributes=_proto_attributes(span.attributes, keys),
                        resource=resource,
                        where=where,
                    )
                )
    return spans


def _proto_attributes(pairs: Any, keys: Collection[str] | None = None) -> dict[str, AttributeValue]:
    return {
        pair.key: _proto_value(pair.value) for pair in pairs if keys is None or pair.key in keys
    }


def _proto_value(value: Any) -> AttributeValue:
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_proto_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return _proto_attributes(value.kvlist_value.values)
    plain: AttributeValue = getattr(value, kind)
    return plain


for _model in (_ArrayValue, _KeyValueList, _AnyValue, _KeyValue):
    _model.model_rebuild()
