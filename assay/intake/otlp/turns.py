"""One case's trace split into the turns of a conversation (docs/records.md, "Turns").

Where each turn begins, by what the trace holds:
- **agent invocations**: each top-level invocation below the case span (an agent span: GenAI
  `invoke_agent`, OpenInference `AGENT` or `CHAIN`, with no such span between it and the case
  span — an OpenAI Agents `Runner.run`, a LangGraph `invoke`) is one turn, in start-time order;
  a case span that is itself an invocation is the one turn (a graph's root span read as the
  case: its nodes are steps of that turn, not turns).
  Its user is the last user message of its own input messages, else of the first model span
  below it that recorded them; its answer is its own output, else that of its last-ending model
  span with text.
- else **model spans that recorded their input messages** (a raw client's spans, as
  openai-v2 writes them): each holds the conversation so far, so a model span whose input holds
  more user messages than any before it begins a turn, that last user message its user; the
  turn's answer is its last-ending model span's text.
- else the trace cannot tell where a turn begins: no exchanges (the whole record is one turn).

A step of calls belongs to the last turn that began at or before it (its requesting model
span's end, or its first tool span's start).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from assay.intake.otlp.conventions import is_llm_span, output_text, user_inputs
from assay.intake.otlp.tools import OPERATION, SPAN_KIND, descendants
from assay.intake.record import Exchange
from assay.otel.traces import Span
from assay.trajectory import ToolCall, Trajectory

AGENT_OPERATIONS: Final = frozenset({"invoke_agent"})
AGENT_KINDS: Final = frozenset({"AGENT", "CHAIN"})


@dataclass(slots=True)
class _Turn:
    start_ns: int
    user: str
    answers: list[Span] = field(default_factory=list)
    """Spans whose output may be the turn's answer, the preferred first."""
    steps: list[tuple[ToolCall, ...]] = field(default_factory=list)


def is_agent_span(span: Span) -> bool:
    """Whether a span is one invocation of an agent (or of a chain that runs one)."""
    return (
        span.attributes.get(OPERATION) in AGENT_OPERATIONS
        or span.attributes.get(SPAN_KIND) in AGENT_KINDS
    )


def _invocations(case_span: Span, below: Sequence[Span]) -> list[Span]:
    """The agent spans below the case span with no agent span between them and it; the case
    span alone when it is one."""
    if is_agent_span(case_span):
        return [case_span]
    by_id = {span.span_id: span for span in below}
    found = []
    for span in below:
        if span is case_span or not is_agent_span(span):
            continue
        parent = by_id.get(span.parent_span_id or "")
        while parent is not None and parent is not case_span and not is_agent_span(parent):
            parent = by_id.get(parent.parent_span_id or "")
        if parent is case_span:
            found.append(span)
    return sorted(found, key=lambda span: (span.start_ns, span.span_id))


def _last_user(spans: Sequence[Span]) -> str:
    for span in spans:
        users = user_inputs(span.attributes)
        if users:
            return users[-1]
    return ""


def _by_invocation(case_span: Span, below: Sequence[Span], spans: Sequence[Span]) -> list[_Turn]:
    turns = []
    for invocation in _invocations(case_span, below):
        models = sorted(
            (span for span in descendants(invocation, spans) if is_llm_span(span.attributes)),
            key=lambda span: (span.start_ns, span.span_id),
        )
        latest_first = sorted(models, key=lambda span: span.end_ns, reverse=True)
        turn = _Turn(invocation.start_ns, _last_user([invocation, *models]))
        turn.answers = [invocation, *latest_first]
        turns.append(turn)
    return turns


def _by_model_inputs(models: Sequence[Span]) -> list[_Turn]:
    turns: list[_Turn] = []
    asked = 0
    for span in sorted(models, key=lambda span: (span.start_ns, span.span_id)):
        users = user_inputs(span.attributes)
        if users is None:
            return []
        if len(users) > asked or not turns:
            asked = max(asked, len(users))
            turns.append(_Turn(span.start_ns, users[-1] if users else ""))
        turns[-1].answers.append(span)
    for turn in turns:
        turn.answers.sort(key=lambda span: span.end_ns, reverse=True)
    return turns


def exchanges(
    case_span: Span,
    below: Sequence[Span],
    spans: Sequence[Span],
    steps: Sequence[tuple[int, tuple[ToolCall, ...]]],
) -> tuple[Exchange, ...]:
    """The turns of one case: `below` is the case span and every span under it, `spans` the
    whole trace, `steps` the record's steps in order, each as (when it began, its calls)."""
    turns = _by_invocation(case_span, below, spans)
    if not turns:
        turns = _by_model_inputs([span for span in below if is_llm_span(span.attributes)])
    if not turns:
        return ()
    for start_ns, calls in steps:
        owner = next((t for t in reversed(turns) if t.start_ns <= start_ns), turns[0])
        owner.steps.append(calls)
    return tuple(
        Exchange(
            user=turn.user,
            text=next(
                (text for span in turn.answers if (text := output_text(span.attributes))),
                None,
            ),
            trajectory=Trajectory(tuple(turn.steps)),
        )
        for turn in turns
    )
