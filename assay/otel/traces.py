"""OTLP trace data decoded into a small typed span model (OTLP/JSON and OTLP/protobuf).

OTLP/JSON is parsed by the standard library and walked by hand (several times faster than
validating models, for documents of thousands of spans). Both the spec's camelCase keys and
protobuf's field names are accepted, 64-bit integers as numbers or strings, enums as numbers or
names, and trace/span ids in hex (the OTLP/JSON spec, the Collector) or base64 (protobuf's own
JSON mapping, `MessageToJson`). Protobuf bodies are decoded with `opentelemetry-proto`. Both
become the same `Span`s. Errors name the document and the field path, never an attribute's value.

Attribute values stay in memory only as long as the caller holds the spans; nothing here writes.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Container, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from assay.errors import InputError
from assay.jsonl import numbered_lines

AttributeValue = str | bool | int | float | bytes | list[Any] | dict[str, Any] | None

STATUS_UNSET: Final = 0
STATUS_OK: Final = 1
STATUS_ERROR: Final = 2
_STATUS_NAMES: Final = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
MAX_DEPTH: Final = 64
"""The deepest nesting of attribute values (`arrayValue` / `kvlistValue`) read; deeper ones, and
documents too deep for the JSON parser, are input errors (never a RecursionError)."""
_TOO_DEEP: Final = f"the document nests deeper than {MAX_DEPTH} levels"
_SPECIAL_DOUBLES: Final = frozenset({"NaN", "Infinity", "-Infinity"})
_HEX: Final = re.compile(r"[0-9a-fA-F]*")
_DOCUMENT_START: Final = re.compile(rb'^\s*\{\s*"(resourceSpans|resource_spans)"')
CONTENT_EVENTS: Final = frozenset(
    {
        "gen_ai.content.completion",
        "gen_ai.content.prompt",
        "gen_ai.client.inference.operation.details",
    }
)
"""Span events that carry message content as attributes (the older GenAI shape puts the
completion on a `gen_ai.content.completion` event; the current one may put `gen_ai.output.messages`
on an operation-details event). Their attributes are read as the span's own, never over them."""


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


class _Shape(ValueError):
    """A document that is JSON but not a traces document: where, and what is wrong."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(problem)
        self.path = path
        self.problem = problem


def _field(node: dict[str, Any], camel: str, snake: str) -> Any:
    value = node.get(camel)
    return node.get(snake) if value is None else value


def _object(node: Any, path: str) -> dict[str, Any]:
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise _Shape(path, "must be a JSON object")
    return node


def _list(node: dict[str, Any], camel: str, snake: str, path: str) -> list[Any]:
    value = _field(node, camel, snake)
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Shape(f"{path}{camel}", "must be a JSON list")
    return value


def _int(value: Any, path: str) -> int:
    # OTLP/JSON writes 64-bit integers as decimal strings; the protobuf mapping takes both.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    if value is None:
        return 0
    raise _Shape(path, "must be an integer (a number or a decimal string)")


def _any_value(node: Any, path: str, depth: int = 0) -> AttributeValue:
    if depth > MAX_DEPTH:
        raise _Shape(path, _TOO_DEEP)
    node = _object(node, path)
    for camel, snake in (("stringValue", "string_value"), ("boolValue", "bool_value")):
        value = _field(node, camel, snake)
        if value is not None:
            return value  # type: ignore[no-any-return]
    value = _field(node, "intValue", "int_value")
    if value is not None:
        return _int(value, f"{path}.intValue")
    value = _field(node, "doubleValue", "double_value")
    if value is not None:
        if isinstance(value, str) and value in _SPECIAL_DOUBLES:  # OTLP/JSON's non-finite
            return float(value)
        return float(value) if isinstance(value, int | float) else None
    value = _field(node, "bytesValue", "bytes_value")
    if isinstance(value, str):
        return base64.b64decode(value)
    array = _field(node, "arrayValue", "array_value")
    if array is not None:
        values = _list(_object(array, path), "values", "values", f"{path}.arrayValue.")
        return [
            _any_value(item, f"{path}.arrayValue.values[{i}]", depth + 1)
            for i, item in enumerate(values)
        ]
    pairs = _field(node, "kvlistValue", "kvlist_value")
    if pairs is not None:
        return _attributes(_object(pairs, path), f"{path}.kvlistValue", None, "values", depth + 1)
    return None


def _attributes(
    node: dict[str, Any],
    path: str,
    keys: Container[str] | None,
    name: str = "attributes",
    depth: int = 0,
) -> dict[str, AttributeValue]:
    found: dict[str, AttributeValue] = {}
    for i, pair in enumerate(_list(node, name, name, f"{path}.")):
        where = f"{path}.{name}[{i}]"
        key = _object(pair, where).get("key")
        if not isinstance(key, str):
            raise _Shape(where, "an attribute needs a string key")
        if keys is None or key in keys:
            found[key] = _any_value(pair.get("value"), f"{where}.value", depth)
    return found


def _status_code(span: dict[str, Any], where: str) -> int:
    code = _object(span.get("status"), f"{where}.status").get("code")
    if isinstance(code, str) and code in _STATUS_NAMES:
        return _STATUS_NAMES[code]
    return _int(code, f"{where}.status.code")


def _walk(document: Any, keys: Container[str] | None) -> Iterator[Span]:
    document = _object(document, "(document)")
    if _field(document, "resourceSpans", "resource_spans") is None:
        raise _Shape("resourceSpans", "missing: not an OTLP traces document")
    for r, resource_spans in enumerate(_list(document, "resourceSpans", "resource_spans", "")):
        path = f"resourceSpans[{r}]"
        resource_spans = _object(resource_spans, path)
        resource_node = _object(resource_spans.get("resource"), f"{path}.resource")
        resource = _attributes(resource_node, f"{path}.resource", keys)
        for s, scope in enumerate(_list(resource_spans, "scopeSpans", "scope_spans", f"{path}.")):
            scope_path = f"{path}.scopeSpans[{s}]"
            for n, span in enumerate(
                _list(_object(scope, scope_path), "spans", "spans", f"{scope_path}.")
            ):
                where = f"{scope_path}.spans[{n}]"
                span = _object(span, where)
                try:
                    trace_id = decode_id(_field(span, "traceId", "trace_id"), 16, "traceId")
                    span_id = decode_id(_field(span, "spanId", "span_id"), 8, "spanId")
                    parent = decode_id(
                        _field(span, "parentSpanId", "parent_span_id"), 8, "parentSpanId"
                    )
                except (ValueError, TypeError) as exc:
                    raise _Shape(where, str(exc)) from None
                if trace_id is None or span_id is None:
                    raise _Shape(where, "span without an id")
                attributes = _attributes(span, where, keys)
                for e, event in enumerate(_list(span, "events", "events", f"{where}.")):
                    event = _object(event, f"{where}.events[{e}]")
                    if event.get("name") in CONTENT_EVENTS:
                        found = _attributes(event, f"{where}.events[{e}]", keys)
                        attributes = {**found, **attributes}
                yield Span(
                    trace_id=trace_id,
                    span_id=span_id,
                    parent_span_id=parent,
                    start_ns=_int(
                        _field(span, "startTimeUnixNano", "start_time_unix_nano"),
                        f"{where}.startTimeUnixNano",
                    ),
                    end_ns=_int(
                        _field(span, "endTimeUnixNano", "end_time_unix_nano"),
                        f"{where}.endTimeUnixNano",
                    ),
                    status_code=_status_code(span, where),
                    attributes=attributes,
                    resource=resource,
                    where=where,
                )


def json_spans(
    raw: bytes, source: str, line: int, keys: Container[str] | None = None
) -> list[Span]:
    """The spans of one OTLP/JSON document (`TracesData` / `ExportTraceServiceRequest`).

    With `keys`, only those attributes are kept (the others are never converted).

    Raises:
        InputError: malformed JSON, or JSON that is not a traces document — naming source,
            line and the position in the document, never a value.
    """
    try:
        document = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InputError(source, f"malformed JSON ({_json_position(raw)})", line=line) from None
    except RecursionError:
        raise InputError(source, _TOO_DEEP, line=line) from None
    try:
        return list(_walk(document, keys))
    except _Shape as exc:
        raise InputError(source, exc.problem, line=line, field=exc.path) from None


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
    one document, possibly spread over many lines (`MessageToJson`, `json.dump(indent=…)`), or
    one OTLP/protobuf message (bytes that do not open with `{`: the whole file)."""
    first_block = next(blocks, b"")
    if first_block and first_block.lstrip()[:1] != b"{":
        body = b"".join([first_block, *blocks])
        yield Document(1, 0, len(body), body)
        return
    lines = numbered_lines(iter([first_block, *blocks]) if first_block else blocks)
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


def document_spans(
    raw: bytes, source: str, line: int, keys: Container[str] | None = None
) -> list[Span]:
    """The spans of one document: OTLP/JSON when it opens with `{`, else OTLP/protobuf.

    Raises:
        InputError: neither, naming the source and line, never a value.
    """
    if raw.lstrip()[:1] == b"{":
        return json_spans(raw, source, line, keys)
    try:
        return decode_protobuf(raw, keys)
    except ValueError:
        raise InputError(source, NOT_TRACES, line=line) from None


NOT_TRACES: Final = (
    "not OTLP JSON, OTLP JSON Lines nor OTLP protobuf (an ExportTraceServiceRequest)"
)


def looks_like_protobuf(head: bytes) -> bool:
    """Whether a file's first bytes could open an OTLP/protobuf `ExportTraceServiceRequest`:
    field 1 (`resource_spans`, length-delimited, tag byte 0x0A) and no JSON after it (a JSON
    Lines file may open with a blank line, which is the same byte)."""
    return head[:1] == b"\x0a" and head.lstrip()[:1] not in (b"{", b"")


def decode_protobuf(body: bytes, keys: Container[str] | None = None) -> list[Span]:
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
                attributes = _proto_attributes(span.attributes, keys)
                for event in span.events:
                    if event.name in CONTENT_EVENTS:
                        attributes = {**_proto_attributes(event.attributes, keys), **attributes}
                spans.append(
                    Span(
                        trace_id=trace_id,
                        span_id=span_id,
                        parent_span_id=decode_id(span.parent_span_id, 8, f"{where}.parentSpanId"),
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        status_code=span.status.code,
                        attributes=attributes,
                        resource=resource,
                        where=where,
                    )
                )
    return spans


def _proto_attributes(pairs: Any, keys: Container[str] | None = None) -> dict[str, AttributeValue]:
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
