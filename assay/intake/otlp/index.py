"""OTLP trace exports as candidate outputs: one trace per case, read in place by byte range.

Per trace, the *case span* names the case: the span that carries the case attribute
(`assay.case_id` unless configured) itself, the root first, else the earliest; failing that,
the root span whose resource carries it. A trace with no such span is an input error, and so are
spans of one trace naming two cases. What the case's record holds — text, calls, usage, and
what it could not show — is `assay.intake.otlp.record`'s; a tool span's arguments are checked
when indexing, like an outputs line's.

Indexing streams every document once and keeps, per trace, only ids, numbers and the positions
of the documents holding its spans. A slice names its case ids and the byte ranges of those
documents; reading a slice decodes just those ranges. The text is never copied anywhere. Each
range is pinned by a digest of its documents (the SHA-256 of their SHA-256s, hashed as the index
pass reads them): a range that reads other documents, or a slice missing one of its case ids,
raises `OutputsChangedError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from assay.errors import InputError, OutputsChangedError
from assay.intake.otlp import record as otlp
from assay.intake.otlp.conventions import (
    is_input_attribute,
    is_llm_span,
    is_output_attribute,
    is_usage_attribute,
    output_text,
    requested_calls,
)
from assay.intake.otlp.tools import TOOL_ATTRIBUTES, is_tool_span, tool_call
from assay.intake.record import MAX_TOOL_CALLS_PER_OUTPUT, AgentRecord, TooManyCalls
from assay.otel.traces import Document, Span, document_spans, documents
from assay.trajectory import ArgumentsError

Claim = Callable[[str, str, int, str], None]
"""Registers a case id found at (source, line, field); raises InputError if unknown or taken."""


class Source(Protocol):
    """One trace export object (`assay.outputs.sources.OutputSource` is one)."""

    name: str

    def read(self, start: int, end: int) -> bytes: ...

    def blocks(self) -> Iterator[bytes]: ...


@dataclass(slots=True)
class Range:
    """Whole lines of one object: bytes [start, end), first line `first_line`."""

    path: str
    start: int
    end: int
    first_line: int
    sha256: str | None = None
    """`documents_digest` of the documents in the range when it was indexed."""


def documents_digest(digests: Iterable[bytes]) -> str:
    """One digest for a run of documents, from each document's SHA-256 in file order."""
    return hashlib.sha256(b"".join(digests)).hexdigest()


@dataclass
class TraceSlice:
    """One chunk's cases and the byte ranges holding their traces' spans (its home range,
    where their case spans are, first)."""

    case_ids: list[str]
    ranges: list[Range]


@dataclass(slots=True)
class _Place:
    source: str
    line: int
    where: str
    document: int
    order: int


@dataclass(slots=True)
class _Trace:
    trace_id: str
    first: _Place
    case_id: str | None = None
    case_rank: tuple[int, int, int] = (3, 0, 0)
    case_place: _Place | None = None
    case_span: Span | None = None
    """Kept only while reading a slice; indexing keeps `case_has_text` instead."""
    case_span_id: str | None = None
    case_has_text: bool = False
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

    def has_text(self) -> bool:
        """Whether the case span, or an LLM span below it, carries output text."""
        if self.case_has_text:
            return True
        for span_id in self.texted:
            seen: set[str] = set()
            node = self.parents.get(span_id)
            while node is not None and node not in seen:
                if node == self.case_span_id:
                    return True
                seen.add(node)
                node = self.parents.get(node)
        return False


@dataclass(slots=True)
class _Located:
    path: str
    document: Document
    digest: bytes


@dataclass(frozen=True, slots=True)
class _Needed:
    """The attributes reading traces as outputs needs: the case attribute, output, usage, tool
    calls and input messages (where each turn of a conversation begins)."""

    case_attribute: str

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (
            name == self.case_attribute
            or is_output_attribute(name)
            or is_usage_attribute(name)
            or is_input_attribute(name)
            or name in TOOL_ATTRIBUTES
        )


class TraceBook:
    """Spans gathered by trace, with each trace's case span chosen as documents arrive."""

    def __init__(self, case_attribute: str, *, keep_spans: bool) -> None:
        self.case_attribute = case_attribute
        self.keep_spans = keep_spans
        """Keep the spans (to read a slice); indexing keeps only ids, numbers and positions."""
        self.traces: dict[str, _Trace] = {}
        self.located: list[_Located] = []
        self._order = 0
        self._needed = _Needed(case_attribute)

    def add(self, path: str, document: Document) -> None:
        """Decode one document and file its spans under their traces."""
        number = len(self.located)
        self.located.append(
            _Located(
                path,
                Document(document.line, document.start, document.end, b""),
                hashlib.sha256(document.raw).digest(),
            )
        )
        for span in document_spans(document.raw, path, document.line, self._needed):
            self._order += 1
            place = _Place(path, document.line, span.where, number, self._order)
            trace = self.traces.get(span.trace_id)
            if trace is None:
                trace = self.traces[span.trace_id] = _Trace(span.trace_id, place)
            trace.documents.add(number)
            if self.keep_spans:
                trace.spans.append(span)
            else:
                self._note(trace, span, place)
            self._consider(trace, span, place)

    def _note(self, trace: _Trace, span: Span, place: _Place) -> None:
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
        calls = max(trace.tool_spans, trace.requested)
        if calls > MAX_TOOL_CALLS_PER_OUTPUT:
            raise InputError(
                place.source, TooManyCalls(calls).problem, line=place.line, field=place.where
            )

    def _consider(self, trace: _Trace, span: Span, place: _Place) -> None:
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
            trace.case_span_id = span.span_id
            trace.case_has_text = output_text(span.attributes) is not None
            trace.case_span = span if self.keep_spans else None

    def cases(self) -> Iterator[_Trace]:
        """Every trace in the order of its case span; a trace without one is an input error."""
        for trace in self.traces.values():
            if trace.case_place is None:
                raise InputError(
                    trace.first.source,
                    f"trace {trace.trace_id}: no span carries attribute "
                    f"{self.case_attribute!r} (on the span, or on the root span's resource)",
                    line=trace.first.line,
                    field=trace.first.where,
                )
        yield from sorted(
            self.traces.values(), key=lambda t: t.case_place.order if t.case_place else 0
        )


def read_documents(book: TraceBook, source: Source, part: Range | None) -> str:
    """Add the documents of `source` (or of one range of it) to `book`; their digest."""
    first = len(book.located)
    if part is None:
        blocks: Iterable[bytes] = source.blocks()
        line_offset, byte_offset = 0, 0
    else:
        blocks = [source.read(part.start, part.end)]
        line_offset, byte_offset = part.first_line - 1, part.start
    for document in documents(iter(blocks)):
        book.add(
            source.name,
            Document(
                document.line + line_offset,
                document.start + byte_offset,
                document.end + byte_offset,
                document.raw,
            ),
        )
    return documents_digest(located.digest for located in book.located[first:])


@dataclass
class TraceIndex:
    """What indexing trace exports found: slices of selected cases, and the cases seen."""

    slices: list[TraceSlice]
    without_text: set[str]
    """Case ids whose case span, and every model span below it, carry no output text (scored:
    their text checks are unavailable)."""


def index_traces(
    sources: Sequence[Source],
    case_attribute: str,
    wanted: Collection[str],
    chunk_size: int,
    claim: Claim,
) -> TraceIndex:
    """Validate every trace in `sources` and cut the wanted cases into slices of `chunk_size`.

    Raises:
        InputError: a malformed document, a trace without a case span, an unknown case id or a
            second trace for one case — naming file, line and the span's position.
    """
    book = TraceBook(case_attribute, keep_spans=False)
    for source in sources:
        read_documents(book, source, None)
    slices: list[TraceSlice] = []
    batch: list[_Trace] = []
    without_text: set[str] = set()
    for trace in book.cases():
        place, case_id = trace.case_place, trace.case_id
        assert place is not None and case_id is not None
        claim(case_id, place.source, place.line, place.where)
        if not trace.has_text():
            without_text.add(case_id)
        if case_id not in wanted:
            continue
        if batch and (len(batch) == chunk_size or _home(book, batch[0]) != place.source):
            slices.append(_slice(book, batch))
            batch = []
        batch.append(trace)
    if batch:
        slices.append(_slice(book, batch))
    return TraceIndex(slices=slices, without_text=without_text)


def _home(book: TraceBook, trace: _Trace) -> str:
    assert trace.case_place is not None
    return book.located[trace.case_place.document].path


def _slice(book: TraceBook, batch: list[_Trace]) -> TraceSlice:
    numbers = sorted({n for trace in batch for n in trace.documents})
    ranges: list[Range] = []
    digests: list[list[bytes]] = []
    for n in numbers:
        located = book.located[n]
        doc = located.document
        last = ranges[-1] if ranges else None
        if last is not None and last.path == located.path and last.end >= doc.start:
            last.end = max(last.end, doc.end)
            digests[-1].append(located.digest)
            continue
        ranges.append(Range(located.path, doc.start, doc.end, doc.line))
        digests.append([located.digest])
    for part, held in zip(ranges, digests, strict=True):
        part.sha256 = documents_digest(held)
    home = _home(book, batch[0])
    own = next(r for r in ranges if r.path == home)
    return TraceSlice(
        case_ids=[trace.case_id for trace in batch if trace.case_id is not None],
        ranges=[own, *(r for r in ranges if r is not own)],
    )


def read_trace_slice(
    piece: TraceSlice,
    case_attribute: str,
    selected: Collection[str],
    open_source: Callable[[str], Source],
) -> Iterator[tuple[str, AgentRecord]]:
    """The selected cases of one trace slice, each with its record, in the slice's order, read
    from its byte ranges.

    Raises:
        OutputsChangedError: a range holds other documents than when it was indexed, or a case
            id of the slice is no longer there.
    """
    book = TraceBook(case_attribute, keep_spans=True)
    for part in piece.ranges:
        digest = read_documents(book, open_source(part.path), part)
        if part.sha256 is not None and digest != part.sha256:
            raise OutputsChangedError(
                part.path, "the byte range holds other documents than when it was indexed"
            )
    # Other slices' traces may be only partly in these ranges: look up ours, validate nothing
    # more (indexing already checked every trace with all its spans).
    found = {trace.case_id: trace for trace in book.traces.values() if trace.case_id}
    for case_id in piece.case_ids:
        trace = found.get(case_id)
        span = None if trace is None else trace.case_span
        if trace is None or span is None:
            raise OutputsChangedError(
                piece.ranges[0].path, "a case the index found in the range is no longer there"
            )
        if case_id in selected:
            yield case_id, otlp.read(span, trace.spans)
