"""A case's tool calls as its trace tells them: the trajectory from tool spans.

A tool span is a descendant of the case span with `gen_ai.operation.name = execute_tool` (the
GenAI conventions: `gen_ai.tool.name`, `gen_ai.tool.call.id`, `gen_ai.tool.call.arguments`) or
an OpenInference `TOOL` span (`tool.name`; arguments in `tool.parameters`, else `input.value`).
A call failed when its span's status is ERROR or it carries `error.type`. Tool spans that
overlap in time under the same parent are one parallel step; otherwise steps follow start time.
The same trajectory as chat messages (`assay.trajectory`) gives the same steps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Final

from assay.otel.traces import STATUS_ERROR, AttributeValue, Span
from assay.trajectory import ArgumentsError, ToolCall, Trajectory, parse_arguments

OPERATION: Final = "gen_ai.operation.name"
EXECUTE_TOOL: Final = "execute_tool"
TOOL_NAME: Final = "gen_ai.tool.name"
CALL_ID: Final = "gen_ai.tool.call.id"
CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
ERROR_TYPE: Final = "error.type"
SPAN_KIND: Final = "openinference.span.kind"
OI_TOOL_NAME: Final = "tool.name"
OI_PARAMETERS: Final = "tool.parameters"
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
        OI_PARAMETERS,
        OI_INPUT,
    }
)
"""The attributes reading a trajectory needs."""


def is_tool_span(attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether a span records one tool call."""
    return attributes.get(OPERATION) == EXECUTE_TOOL or attributes.get(SPAN_KIND) == "TOOL"


def tool_call(span: Span) -> ToolCall:
    """The call a tool span records.

    Raises:
        ArgumentsError: no tool name, or arguments that are not a JSON object — naming the
            span's position and the attribute, never its value.
    """
    attributes = span.attributes
    name = attributes.get(TOOL_NAME) or attributes.get(OI_TOOL_NAME)
    if not isinstance(name, str) or not name:
        raise ArgumentsError(f"{span.where}.attributes", f"a tool span needs {TOOL_NAME}")
    key = next(
        (k for k in (CALL_ARGUMENTS, OI_PARAMETERS, OI_INPUT) if attributes.get(k) is not None),
        None,
    )
    value = attributes.get(key) if key else None
    field = f"{span.where}.attributes.{key}"
    if isinstance(value, dict):
        args = value
    elif isinstance(value, str):
        args = parse_arguments(value, field)
    elif value is None:
        args = {}
    else:
        raise ArgumentsError(field, "tool call arguments must be a JSON object")
    call_id = attributes.get(CALL_ID)
    failed = span.status_code == STATUS_ERROR or bool(attributes.get(ERROR_TYPE))
    return ToolCall(name, args, call_id if isinstance(call_id, str) else None, failed)


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


def trajectory_of(case_span: Span, spans: Iterable[Span]) -> Trajectory:
    """The case's tool calls: its tool descendants, grouped into steps."""
    tools = sorted(
        (span for span in descendants(case_span, spans) if is_tool_span(span.attributes)),
        key=lambda span: (span.start_ns, span.end_ns, span.span_id),
    )
    steps: list[list[Span]] = []
    for span in tools:
        step = steps[-1] if steps else None
        if (
            step is not None
            and step[0].parent_span_id == span.parent_span_id
            and span.start_ns < max(other.end_ns for other in step)
        ):
            step.append(span)
        else:
            steps.append([span])
    return Trajectory(tuple(tuple(tool_call(span) for span in step) for step in steps))
