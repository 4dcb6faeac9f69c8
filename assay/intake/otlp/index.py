"""OTLP trace exports as candidate outputs: one trace (or one conversation's traces) per case,
read in place by byte range. Which traces are one case is `assay.intake.otlp.book`'s.

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
from dataclasses import dataclass
from typing import Protocol

from assay.errors import OutputsChangedError
from assay.intake.otlp.book import Conversation, Trace
from assay.intake.otlp.book import TraceBook as TraceBook  # what read_documents fills
from assay.intake.record import AgentRecord
from assay.otel.traces import Document, documents

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
        InputError: a malformed document, a trace (or conversation) naming no case or two, an
            unknown case id or a second trace (or conversation) for one case — naming file, line
            and the span's position.
    """
    book = TraceBook(case_attribute, keep_spans=False)
    for source in sources:
        read_documents(book, source, None)
    slices: list[TraceSlice] = []
    batch: list[Conversation] = []
    without_text: set[str] = set()
    for conversation in book.conversations():
        place, case_id = conversation.place, conversation.case_id
        claim(case_id, place.source, place.line, place.where)
        if not conversation.has_text():
            without_text.add(case_id)
        if case_id not in wanted:
            continue
        if batch and (len(batch) == chunk_size or _home(book, batch[0]) != place.source):
            slices.append(_slice(book, batch))
            batch = []
        batch.append(conversation)
    if batch:
        slices.append(_slice(book, batch))
    return TraceIndex(slices=slices, without_text=without_text)


def _home(book: TraceBook, conversation: Conversation) -> str:
    return book.located[conversation.place.document].path


def _slice(book: TraceBook, batch: list[Conversation]) -> TraceSlice:
    numbers = sorted({n for c in batch for trace in c.traces for n in trace.documents})
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
        case_ids=[conversation.case_id for conversation in batch],
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
    found: dict[str, list[Trace]] = {}
    for group in book.groups():
        named = {trace.case_id for trace in group if trace.case_id}
        if len(named) == 1:
            found[named.pop()] = group
    for case_id in piece.case_ids:
        traces = found.get(case_id)
        if traces is None:
            raise OutputsChangedError(
                piece.ranges[0].path, "a case the index found in the range is no longer there"
            )
        if case_id in selected:
            yield case_id, book.conversation(traces).read()
