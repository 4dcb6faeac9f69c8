"""A conversation recorded as several traces, read as one record (docs/records.md, "One
conversation, several traces").

Frameworks often record each user turn as its own trace and tie the traces together with a
conversation id on their spans: the GenAI conventions' `gen_ai.conversation.id`, else
OpenInference's `session.id` (its `using_session`; the LangChain instrumentation writes a run's
`session_id`, `conversation_id` or LangGraph `thread_id` metadata there). Which traces belong to
one case is `assay.intake.otlp.index`'s; the joined record is this module's:

- **turns** (`exchanges`): each trace's turns (`AgentRecord.conversation()`: one, for a trace of
  one agent invocation or one user turn of model calls), the traces in the start order of the
  span each is read from (its case span, else its root span);
- **text**: the last trace's; **calls**: every trace's steps, in that order;
- **what it could show**: what every trace could show (text: what the last one could);
- **usage**: summed over the traces that report it; **duration**: the traces' durations summed
  (the agent's time, not the user's between turns).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from assay.intake.otlp import record
from assay.intake.otlp.conventions import SpanUsage, combined
from assay.intake.record import AgentRecord, Evidence, UsageFigures
from assay.otel.traces import AttributeValue, Span
from assay.trajectory import Trajectory

CONVERSATION_ATTRIBUTES: Final = ("gen_ai.conversation.id", "session.id")
"""The span attributes that name a trace's conversation, the first present taken."""


def conversation_of(attributes: Mapping[str, AttributeValue]) -> tuple[str, AttributeValue] | None:
    """The conversation attribute a span carries and its value; None when it carries none."""
    for name in CONVERSATION_ATTRIBUTES:
        value = attributes.get(name)
        if value is not None:
            return name, value
    return None


def read_joined(parts: Sequence[tuple[Span, Sequence[Span]]]) -> AgentRecord:
    """The record of one conversation from its traces in order, each given as (the span it is
    read from, the trace's spans).

    Raises:
        TooManyCalls: the traces' calls together are more than `MAX_TOOL_CALLS_PER_OUTPUT`.
    """
    records = [record.read(span, spans) for span, spans in parts]
    if len(records) == 1:
        return records[0]
    last = records[-1]
    unseen: dict[Evidence, str] = {}
    for part in records:
        unseen.update((e, why) for e, why in part.unseen.items() if e not in unseen)
    unseen.pop(Evidence.TEXT, None)
    if Evidence.TEXT in last.unseen:
        unseen[Evidence.TEXT] = last.unseen[Evidence.TEXT]
    figures = combined(
        SpanUsage(part.usage.input_tokens, part.usage.output_tokens, part.usage.cost_usd)
        for part in records
    )
    usage = UsageFigures(figures.input_tokens, figures.output_tokens, figures.cost_usd)
    if usage.known:
        unseen.pop(Evidence.USAGE, None)
    durations = [part.duration_ms for part in records if part.duration_ms is not None]
    return AgentRecord(
        source=record.FORMAT,
        text=last.text,
        trajectory=Trajectory(tuple(step for part in records for step in part.trajectory.steps)),
        exchanges=tuple(turn for part in records for turn in part.conversation()),
        unseen=unseen,
        usage=usage,
        duration_ms=sum(durations) if durations else None,
    )
