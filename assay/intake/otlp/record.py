"""OTLP traces (JSON, JSON Lines or protobuf): one case's record from its case span and the
spans below it.

Mapping, for the GenAI conventions (older and current shapes), OpenInference and OpenLLMetry:
- **text**: the case span's output (`assay.intake.otlp.conventions.output_text`), else that of its
  last-ending model span with text; none captured is `text` unseen.
- **calls**: every *model* span below the case span (GenAI `chat`/…, OpenInference `LLM`) whose
  output messages were captured lists the calls it requested (`tool_call` parts of
  `gen_ai.output.messages`, OpenInference's `llm.output_messages.N.message.tool_calls.M`,
  OpenLLMetry's `gen_ai.completion.N.tool_calls.M`): those are **one step** (one response
  requested them together, even when their tool spans ran one after another). Every *tool span*
  (`execute_tool`, OpenInference `TOOL`) is the same call as a requested one with its call id,
  else as the first not yet matched call to the same tool requested by the model span that
  ended last before it started; it adds the call's status (ERROR, `error.type`) and, when the
  output did not carry them, its arguments. A tool span that matches no requested call is a call
  of its own: the tool spans between one model span and the next are one step (an agent loop
  asks the model, runs the calls that response asked for, then asks again); before any model
  span, spans overlapping in time under one parent are one step — the only clue left, which
  cannot tell parallel from sequential calls, so with more than one such call the parallel
  structure is unseen.
- **what it could show**: tool names are seen when the trace has a tool span or a model span
  with captured output (a complete account of the calls: none is evidence of none); arguments
  when every call has them; status when every call has its tool span (output messages cannot
  mark a failed call); usage when a span reports tokens or cost.
- **usage**: tokens and cost summed over the model spans when any reports them (an agent span
  often repeats its children's totals), else over every span of the trace.
- **turns** (`exchanges`): by agent invocation, else by the user messages of the model spans'
  inputs (`assay.intake.otlp.turns`).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from assay.intake.otlp import turns
from assay.intake.otlp.conventions import (
    SpanUsage,
    combined,
    is_llm_span,
    output_captured,
    output_text,
    requested_calls,
    span_usage,
)
from assay.intake.otlp.tools import descendants, is_tool_span, tool_call
from assay.intake.record import (
    MAX_TOOL_CALLS_PER_OUTPUT,
    AgentRecord,
    Evidence,
    TooManyCalls,
    UsageFigures,
)
from assay.otel.traces import Span
from assay.trajectory import ToolCall, Trajectory

FORMAT: Final = "otlp"
NO_TEXT: Final = "the trace captured no output text (content capture off?)"
NO_TOOLS: Final = "the trace has no tool spans and no captured model output"
NO_ARGUMENTS: Final = "the trace did not capture tool arguments (content capture off?)"
NO_STATUS: Final = "calls read from model output have no tool span to mark a failed call"
NO_PARALLEL: Final = "the trace has no model spans to tell which calls were made together"


@dataclass(slots=True)
class _Call:
    tool: str
    arguments: dict[str, Any] | None
    call_id: str | None
    failed: bool = False
    spanned: bool = False
    """Whether a tool span recorded it (its status is then known)."""


@dataclass(slots=True)
class _Step:
    start_ns: int
    calls: list[_Call] = field(default_factory=list)


def case_text(case_span: Span, spans: Sequence[Span]) -> str | None:
    """The case span's output text, else that of its last-ending LLM descendant with text."""
    own = output_text(case_span.attributes)
    if own is not None:
        return own
    texts = [
        (span.end_ns, text)
        for span in descendants(case_span, spans)
        if is_llm_span(span.attributes) and (text := output_text(span.attributes)) is not None
    ]
    return max(texts, key=lambda pair: pair[0])[1] if texts else None


def _by_time(spans: Iterable[Span]) -> list[Span]:
    return sorted(spans, key=lambda span: (span.start_ns, span.end_ns, span.span_id))


def _overlapping(tools: list[Span]) -> list[list[Span]]:
    """Tool spans grouped by time: spans overlapping under one parent are one step."""
    steps: list[list[Span]] = []
    step_end = 0
    for span in tools:
        if (
            steps
            and steps[-1][0].parent_span_id == span.parent_span_id
            and span.start_ns < step_end
        ):
            steps[-1].append(span)
            step_end = max(step_end, span.end_ns)
        else:
            steps.append([span])
            step_end = span.end_ns
    return steps


class _Requesters:
    """The model span that ended last before a moment (a binary search over end times)."""

    def __init__(self, models: Sequence[Span]) -> None:
        self._models = sorted(models, key=lambda span: span.end_ns)
        self._ends = [span.end_ns for span in self._models]

    def before(self, moment_ns: int) -> Span | None:
        found = bisect.bisect_right(self._ends, moment_ns)
        return self._models[found - 1] if found else None


def read(case_span: Span, spans: Sequence[Span], duration_ms: float | None = None) -> AgentRecord:
    """The record of one case from its trace.

    Raises:
        ArgumentsError: a tool span without a name or with malformed GenAI arguments (indexing
            reports it as an input error first).
        TooManyCalls: more than `MAX_TOOL_CALLS_PER_OUTPUT` calls; told before tool spans are
            joined to requested calls when either alone is too many (each is a distinct call).
    """
    below = [case_span, *descendants(case_span, spans)]
    models = _by_time(span for span in below if is_llm_span(span.attributes))
    tools = _by_time(span for span in below if is_tool_span(span.attributes))
    steps: list[_Step] = []
    step_of_model: dict[str, _Step] = {}
    captured = 0
    for span in models:
        if not output_captured(span.attributes):
            continue
        captured += 1
        asked = requested_calls(span.attributes)
        if asked:
            step = _Step(span.end_ns, [_Call(c.tool, c.arguments, c.call_id) for c in asked])
            steps.append(step)
            step_of_model[span.span_id] = step
    at_least = max(len(tools), sum(len(step.calls) for step in steps))
    if at_least > MAX_TOOL_CALLS_PER_OUTPUT:
        raise TooManyCalls(at_least)
    by_id = {c.call_id: c for step in steps for c in step.calls if c.call_id is not None}
    loose: list[Span] = []
    requesters = _Requesters(models)
    for span in tools:
        spanned = tool_call(span)
        target = by_id.get(spanned.call_id) if spanned.call_id else None
        if target is None or target.spanned:
            asker = requesters.before(span.start_ns)
            requester = step_of_model.get(asker.span_id) if asker else None
            target = next(
                (
                    c
                    for c in (requester.calls if requester else [])
                    if c.tool == spanned.tool and not c.spanned
                ),
                None,
            )
        if target is None:
            loose.append(span)
            continue
        target.spanned, target.failed = True, spanned.failed
        if target.arguments is None:
            target.arguments = spanned.arguments
    parallel_seen = True
    if loose:
        # A loose tool span was requested by the model response before it: an agent loop asks
        # the model, runs the calls it asked for, then asks again. With no model span before
        # it only time is left, which cannot tell calls made together from calls in a row.
        groups: dict[str, list[Span]] = {}
        timed: list[Span] = []
        for span in loose:
            asker = requesters.before(span.start_ns)
            if asker is not None:
                groups.setdefault(asker.span_id, []).append(span)
            else:
                timed.append(span)
        grouped = [*groups.values(), *_overlapping(timed)]
        parallel_seen = len(timed) <= 1
        for group in grouped:
            calls = []
            for span in group:
                spanned = tool_call(span)
                calls.append(
                    _Call(spanned.tool, spanned.arguments, spanned.call_id, spanned.failed, True)
                )
            steps.append(_Step(group[0].start_ns, calls))
    steps.sort(key=lambda step: step.start_ns)
    calls = [c for step in steps for c in step.calls]
    unseen: dict[Evidence, str] = {}
    text = case_text(case_span, spans)
    if text is None:
        unseen[Evidence.TEXT] = NO_TEXT
    if not tools and not captured:
        unseen.update(
            {
                Evidence.TOOL_NAMES: NO_TOOLS,
                Evidence.TOOL_ARGUMENTS: NO_TOOLS,
                Evidence.TOOL_STATUS: NO_TOOLS,
                Evidence.PARALLEL: NO_TOOLS,
            }
        )
    if any(c.arguments is None for c in calls):
        unseen[Evidence.TOOL_ARGUMENTS] = NO_ARGUMENTS
    if any(not c.spanned for c in calls):
        unseen[Evidence.TOOL_STATUS] = NO_STATUS
    if not parallel_seen:
        unseen[Evidence.PARALLEL] = NO_PARALLEL
    figures = usage(models, spans)
    usage_figures = UsageFigures(figures.input_tokens, figures.output_tokens, figures.cost_usd)
    if not usage_figures.known:
        unseen[Evidence.USAGE] = "no span reports tokens or cost"
    begun = [
        (
            step.start_ns,
            tuple(ToolCall(c.tool, c.arguments or {}, c.call_id, c.failed) for c in step.calls),
        )
        for step in steps
    ]
    return AgentRecord(
        source=FORMAT,
        text=text,
        trajectory=Trajectory(tuple(made for _, made in begun)),
        exchanges=turns.exchanges(case_span, below, spans, begun),
        unseen=unseen,
        usage=usage_figures,
        duration_ms=case_span.duration_ms if duration_ms is None else duration_ms,
    )


def usage(models: Sequence[Span], spans: Sequence[Span]) -> SpanUsage:
    """Usage summed over the model spans when any reports it, else over every span."""
    of_models = combined(span_usage(span) for span in models)
    if (of_models.input_tokens, of_models.output_tokens, of_models.cost_usd) != (None,) * 3:
        return of_models
    return combined(span_usage(span) for span in spans)
