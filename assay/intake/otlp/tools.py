"""Tool spans: what one span that records a tool call says about it.

A tool span has `gen_ai.operation.name = execute_tool` (the GenAI conventions: `gen_ai.tool.name`,
`gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`) or is an OpenInference `TOOL` span
(`tool.name`; the call's arguments in `input.value` — `tool.parameters` is the tool's JSON
*schema*, never the arguments). A call failed when its span's status is ERROR or it carries
`error.type`. How spans become a case's steps is `assay.intake.otlp`'s.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from assay.otel.traces import STATUS_ERROR, AttributeValue, Span
from assay.trajectory import ArgumentsError, parse_arguments

OPERATION: Final = "gen_ai.operation.name"
EXECUTE_TOOL: Final = "execute_tool"
TOOL_NAME: Final = "gen_ai.tool.name"
CALL_ID: Final = "gen_ai.tool.call.id"
CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
ERROR_TYPE: Final = "error.type"
SPAN_KIND: Final = "openinference.span.kind"
OI_TOOL_NAME: Final = "tool.name"
OI_CALL_ID: Final = "tool_call.id"
OI_INPUT: Final = "input.value"

TOOL_ATTRIBUTES: Final = frozenset(
    {
        OPERATION,
        TOOL_NAME,
        CALL_ID,
        CALL_ARGUMENTS,
        ERROR_TYPE,
        SPAN_KIND,
        OI_TOOL_NAME,
        OI_CALL_ID,
        OI_INPUT,
    }
)
"""The attributes reading a tool span needs."""


@dataclass(frozen=True, slots=True)
class SpannedCall:
    """The call a tool span records: its tool, its arguments (None when the span did not
    capture them as a JSON object), its call id and whether it failed."""

    tool: str
    arguments: dict[str, Any] | None
    call_id: str | None
    failed: bool


def is_tool_span(attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether a span records one tool call."""
    return attributes.get(OPERATION) == EXECUTE_TOOL or attributes.get(SPAN_KIND) == "TOOL"


def tool_call(span: Span) -> SpannedCall:
    """The call a tool span records.

    Raises:
        ArgumentsError: no tool name, or a GenAI `gen_ai.tool.call.arguments` that is not a JSON
            object — naming the span's position and the attribute, never its value.
    """
    attributes = span.attributes
    name = attributes.get(TOOL_NAME) or attributes.get(OI_TOOL_NAME)
    if not isinstance(name, str) or not name:
        raise ArgumentsError(f"{span.where}.attributes", f"a tool span needs {TOOL_NAME}")
    given = attributes.get(CALL_ARGUMENTS)
    field = f"{span.where}.attributes.{CALL_ARGUMENTS}"
    arguments: dict[str, Any] | None
    if isinstance(given, dict):
        arguments = given
    elif isinstance(given, str):
        arguments = parse_arguments(given, field)
    elif given is not None:
        raise ArgumentsError(field, "tool call arguments must be a JSON object")
    else:
        arguments = _json_object(attributes.get(OI_INPUT))
    call_id = attributes.get(CALL_ID) or attributes.get(OI_CALL_ID)
    failed = span.status_code == STATUS_ERROR or bool(attributes.get(ERROR_TYPE))
    return SpannedCall(name, arguments, call_id if isinstance(call_id, str) else None, failed)


def _json_object(value: AttributeValue) -> dict[str, Any] | None:
    """OpenInference's `input.value` as arguments: a JSON object, else not captured as one."""
    if isinstance(value, dict):
        return value
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return None
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, dict) else None


def descendants(root: Span, spans: Iterable[Span]) -> Iterator[Span]:
    """Every span below `root` in its trace (not `root` itself)."""
    children: dict[str, list[Span]] = {}
    for span in spans:
        if span.parent_span_id is not None:
            children.setdefault(span.parent_span_id, []).append(span)
    pending = [root.span_id]
    seen = {root.span_id}
    while pending:
        for child in children.get(pending.pop(), []):
            if child.span_id not in seen:
                seen.add(child.span_id)
                pending.append(child.span_id)
                yield child
