"""Traces gathered by trace id as documents arrive, and grouped into cases (`TraceBook`).

Per trace, the *case span* names the case: the span that carries the case attribute
(`assay.case_id` unless configured) itself, the root first, else the earliest; failing that,
the root span whose resource carries it. Spans of one trace naming two cases are an input error.

Traces whose spans carry one conversation id (`assay.intake.otlp.conversations`) are one
conversation, one case: read as one record, each trace read from its case span, else its root
span. A conversation whose traces name two cases is an input error naming both, and so is one
where none names a case; so is a trace with no case span and no conversation id. What a trace's
record holds — text, calls, usage, and what it could not show — is `assay.intake.otlp.record`'s;
a tool span's arguments are checked when indexing, like an outputs line's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from assay.errors import InputError, shown
from assay.intake.otlp.conventions import (
    is_input_attribute,
    is_llm_span,
    is_output_attribute,
    is_usage_attribute,
    output_text,
    requested_calls,
)
from assay.intake.otlp.conversations import CONVERSATION_ATTRIBUTES, conversation_of, read_joined
from assay.intake.otlp.tools import TOOL_ATTRIBUTES, is_tool_span, tool_call
from assay.intake.record import MAX_TOOL_CALLS_PER_OUTPUT, AgentRecord, TooManyCalls
from assay.otel.traces import Document, Span, document_spans
from assay.trajectory import ArgumentsError


@dataclass(slots=True)
class Place:
    source: str
    line: int
    where: str
    document: int
    order: int


@dataclass(slots=True)
class Trace:
    trace_id: str
    first: Place
    case_id: str | None = None
    case_rank: tuple[int, int, int] = (3, 0, 0)
    case_place: Place | None = None
    case_span: Span | None = None
    """Kept only while reading a slice; indexing keeps `case_has_text` instead."""
    case_span_id: str | None = None
    case_has_text: bool = False
    case_start_ns: int = 0
    root: Span | None = None
    """The span to read the trace from when no span names its case (kept only while reading)."""
    root_rank: tuple[int, int] = (2, 0)
    root_span_id: str | None = None
    root_start_ns: int = 0
    root_has_text: bool = False
    conversation_id: str | None = None
    conversation_attribute: str | None = None
    documents: set[int] = field(default_factory=set)
    spans: list[Span] = field(default_factory=list)
    parents: dict[str, str | None] = field(default_factory=dict)
    """Indexing only: each span's parent id, to tell whether a span with text is below the
    case span (ids only, never attributes)."""
    texted: list[str] = field(default_factory=list)
    """Indexing only: ids of the LLM spans that carry output text."""
    tool_spans: int = 0
    """Indexing only: tool spans seen in the trace."""
    requested: int = 0
    """Indexing only: calls the trace's model spans requested."""

    @property
    def start_ns(self) -> int:
        """When the span the trace is read from started (its turns' place in a conversation)."""
        return self.case_start_ns if self.case_span_id else self.root_start_ns

    @property
    def calls(self) -> int:
        """Indexing only: at least this many calls are in the trace."""
        return max(self.tool_spans, self.requested)

    def read_span(self) -> Span:
        """Reading only: the case span, else the root span."""
        span = self.case_span if self.case_span_id else self.root
        assert span is not None
        return span

    def has_text(self) -> bool:
        """Whether the span it is read from, or an LLM span below it, carries output text."""
        top = self.case_span_id or self.root_span_id
        if self.case_has_text if self.case_span_id else self.root_has_text:
            return True
        for span_id in self.texted:
            seen: set[str] = set()
            node = self.parents.get(span_id)
            while node is not None and node not in seen:
                if node == top:
                    return True
                seen.add(node)
                node = self.parents.get(node)
        return False


@dataclass(slots=True)
class Conversation:
    """One case's traces: one trace, or every trace of one conversation id, in start order."""

    case_id: str
    place: Place
    """Where its case was first named."""
    traces: list[Trace]
    attribute: str | None
    """The attribute that joined its traces (None for a trace with no conversation id)."""

    def has_text(self) -> bool:
        return self.traces[-1].has_text()

    def read(self) -> AgentRecord:
        """Its record (from a book that kept the spans)."""
        return read_joined([(trace.read_span(), trace.spans) for trace in self.traces])


@dataclass(slots=True)
class Located:
    path: str
    document: Document
    digest: bytes


@dataclass(frozen=True, slots=True)
class _Needed:
    """The attributes reading traces as outputs needs: the case attribute, output, usage, tool
    calls, input messages (where each turn of a conversation begins) and conversation ids."""

    case_attribute: str

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name == self.case_attribute
            or is_output_attribute(name)
            or is_usage_attribute(name)
            or is_input_attribute(name)
            or name in TOOL_ATTRIBUTES
            or name in CONVERSATION_ATTRIBUTES
        )


class TraceBook:
    """Spans gathered by trace, with each trace's case span chosen as documents arrive."""

    def __init__(self, case_attribute: str, *, keep_spans: bool) -> None:
        self.case_attribute = case_attribute
        self.keep_spans = keep_spans
        """Keep the spans (to read a slice); indexing keeps only ids, numbers and positions."""
        self.traces: dict[str, Trace] = {}
        self.located: list[Located] = []
        self._order = 0
        self._needed = _Needed(case_attribute)

    def add(self, path: str, document: Document) -> None:
        """Decode one document and file its spans under their traces."""
        number = len(self.located)
        self.located.append(
            Located(
                path,
                Document(document.line, document.start, document.end, b""),
                hashlib.sha256(document.raw).digest(),
            )
        )
        for span in document_spans(document.raw, path, document.line, self._needed):
            self._order += 1
            place = Place(path, document.line, span.where, number, self._order)
            trace = self.traces.get(span.trace_id)
            if trace is None:
                trace = self.traces[span.trace_id] = Trace(span.trace_id, place)
            trace.documents.add(number)
            if self.keep_spans:
                trace.spans.append(span)
            else:
                self._note(trace, span, place)
            self._root(trace, span)
            self._consider(trace, span, place)
            self._converse(trace, span, place)

    def _note(self, trace: Trace, span: Span, place: Place) -> None:
        """Indexing: check a tool span's call, and keep what finding text below needs."""
        trace.parents[span.span_id] = span.parent_span_id
        if is_llm_span(span.attributes):
            if output_text(span.attributes) is not None:
                trace.texted.append(span.span_id)
            trace.requested += len(requested_calls(span.attributes))
        if is_tool_span(span.attributes):
            trace.tool_spans += 1
            try:
                tool_call(span)
            except ArgumentsError as exc:
                raise InputError(
                    place.source, exc.problem, line=place.line, field=exc.field
                ) from None
        # The calls a record holds are at least the larger count: refused here, at intake,
        # rather than when a chunk reads the trace (`AgentRecord` holds the same rule).
        if trace.calls > MAX_TOOL_CALLS_PER_OUTPUT:
            raise InputError(
                place.source, TooManyCalls(trace.calls).problem, line=place.line, field=place.where
            )

    def _root(self, trace: Trace, span: Span) -> None:
        """Keep the earliest root span (the earliest span, in an export without one)."""
        rank = (0 if span.is_root else 1, span.start_ns)
        if rank < trace.root_rank:
            trace.root_rank, trace.root_span_id, trace.root_start_ns = rank, span.span_id, rank[1]
            trace.root_has_text = output_text(span.attributes) is not None
            trace.root = span if self.keep_spans else None

    def _consider(self, trace: Trace, span: Span, place: Place) -> None:
        own = span.attributes.get(self.case_attribute)
        value = own if own is not None else span.resource.get(self.case_attribute)
        if value is None or (own is None and not span.is_root):
            return
        if not isinstance(value, str) or not value:
            raise InputError(
                place.source,
                f"attribute {self.case_attribute!r} must be a non-empty string",
                line=place.line,
                field=place.where,
            )
        if trace.case_id is not None and trace.case_id != value:
            raise InputError(
                place.source,
                f"trace {trace.trace_id}: spans of one trace name two cases "
                f"(first at {trace.first.source} line {trace.first.line})",
                line=place.line,
                field=place.where,
            )
        rank = (0 if own is not None else 1, 0 if span.is_root else 1, span.start_ns)
        if rank < trace.case_rank:
            trace.case_id, trace.case_rank, trace.case_place = value, rank, place
            trace.case_span_id, trace.case_start_ns = span.span_id, span.start_ns
            trace.case_has_text = output_text(span.attributes) is not None
            trace.case_span = span if self.keep_spans else None

    def _converse(self, trace: Trace, span: Span, place: Place) -> None:
        found = conversation_of(span.attributes)
        if found is None:
            return
        name, value = found
        if not isinstance(value, str) or not value:
            raise InputError(
                place.source,
                f"attribute {name!r} must be a non-empty string",
                line=place.line,
                field=place.where,
            )
        if trace.conversation_id is None:
            trace.conversation_id, trace.conversation_attribute = value, name
        elif trace.conversation_id != value:
            raise InputError(
                place.source,
                f"trace {trace.trace_id}: spans of one trace name two conversations, "
                f"{shown(trace.conversation_id)} and {shown(value)}",
                line=place.line,
                field=place.where,
            )

    def groups(self) -> list[list[Trace]]:
        """The traces of each conversation id, and each trace without one alone."""
        by_conversation: dict[str, list[Trace]] = {}
        groups: list[list[Trace]] = []
        for trace in self.traces.values():
            if trace.conversation_id is None:
                groups.append([trace])
            elif trace.conversation_id in by_conversation:
                by_conversation[trace.conversation_id].append(trace)
            else:
                groups.append(by_conversation.setdefault(trace.conversation_id, [trace]))
        return groups

    def conversation(self, traces: list[Trace]) -> Conversation:
        """One group of `groups` as one case.

        Raises:
            InputError: no trace names a case, or two name different cases.
        """
        named = sorted(
            (t for t in traces if t.case_place is not None),
            key=lambda t: t.case_place.order if t.case_place else 0,
        )
        first = traces[0].first
        about = (
            f"conversation {shown(traces[0].conversation_id)} "
            f"({traces[0].conversation_attribute}, {len(traces)} trace(s))"
            if traces[0].conversation_id is not None
            else f"trace {traces[0].trace_id}"
        )
        if not named:
            raise InputError(
                first.source,
                f"{about}: no span carries attribute {self.case_attribute!r} (on the span, or on"
                f" the root span's resource)",
                line=first.line,
                field=first.where,
            )
        case_id, place = named[0].case_id, named[0].case_place
        assert case_id is not None and place is not None
        other = next((t for t in named if t.case_id != case_id), None)
        if other is not None and other.case_place is not None:
            raise InputError(
                other.case_place.source,
                f"{about} names two cases, {shown(case_id)} and {shown(other.case_id)} (first "
                f"at {place.source} line {place.line})",
                line=other.case_place.line,
                field=other.case_place.where,
            )
        calls = sum(trace.calls for trace in traces)
        if calls > MAX_TOOL_CALLS_PER_OUTPUT:
            raise InputError(place.source, TooManyCalls(calls).problem, line=place.line)
        return Conversation(
            case_id,
            place,
            sorted(traces, key=lambda t: (t.start_ns, t.trace_id)),
            traces[0].conversation_attribute,
        )

    def conversations(self) -> list[Conversation]:
        """Every case in the order its case was first named (see the module docstring).

        Raises:
            InputError: a trace or conversation that names no case, or two.
        """
        found = [self.conversation(group) for group in self.groups()]
        return sorted(found, key=lambda conversation: conversation.place.order)
