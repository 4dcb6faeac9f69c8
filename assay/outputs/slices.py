"""The index of outputs (`OutputsIndex`): byte ranges of whole lines, each pinned as it was
indexed, and reading one chunk's slice back (`read_slice`), refused when it changed since."""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator
from typing import Literal

from pydantic import BaseModel

from assay.errors import OutputsChangedError, shown
from assay.outputs.candidate import CandidateOutput, output_of, parse_line
from assay.outputs.sources import OutputSource


class ByteRange(BaseModel):
    """Whole lines of one outputs object: bytes [start, end), first line `first_line`."""

    path: str
    """Local path or `s3://bucket/key`."""
    start: int
    end: int
    first_line: int
    sha256: str | None = None
    """Digest of the range's bytes when it was indexed; a read that finds others is refused."""
    etag: str | None = None
    """An S3 object's ETag when it was indexed: ranges are read `If-Match` it."""
    version_id: str | None = None
    """An S3 object's version when it was indexed (versioned buckets): ranges read that one."""


class OutputSlice(ByteRange):
    """The outputs of one scoring chunk: a run of whole lines in one outputs object.

    A slice of trace exports (`format` "otlp") also names its case ids and the other byte
    ranges that hold spans of its traces (see `assay.intake.otlp.index`); a slice of transcripts
    (`format` "transcript"), one whole file per case, names its case ids and the files after
    its first as `extra` ranges.
    """

    chunk: int = 0
    """Its place in the index, which is the chunk number of the run that scores it."""
    cases: int
    format: Literal["jsonl", "otlp", "transcript"] = "jsonl"
    reader: str | None = None
    """The format named for its records (`--outputs-format`): a message-list format for JSON
    Lines, the transcript format for transcripts; None: told by shape."""
    case_attribute: str | None = None
    case_ids: list[str] | None = None
    extra: list[ByteRange] = []


class OutputsIndex(BaseModel):
    """Where every selected output lives, and which selected cases have none."""

    slices: list[OutputSlice]
    seen: int
    """Valid output lines read (selected or not)."""
    missing: list[str]
    """Selected case ids with no output, in the order given."""
    without_text: int = 0
    """Traced cases whose case span and LLM spans below it carry no output text (each is
    scored, its text checks unavailable)."""
    without_text_example: str | None = None
    """One of them, to name in the warning."""
    trials: bool = False
    """Some output carried `trial`: the run's cases are decided over their trials."""

    def warning(self) -> str | None:
        """The warning that traced cases had no text anywhere; None when all had some."""
        if not self.without_text:
            return None
        return (
            f"{self.without_text} traced case(s) carry no output text on the case span or any"
            f" LLM span below it (e.g. {shown(self.without_text_example)}); their text checks"
            " are unavailable (is content capture off?)"
        )

    def digest(self) -> str:
        """One SHA-256 over every slice's place and pins: a resume that indexes other outputs
        (other bytes, objects or cases) gets another digest."""
        # `trials` is read from the pinned bytes: left out, runs indexed before it keep digests
        return hashlib.sha256(self.model_dump_json(exclude={"trials"}).encode()).hexdigest()


def read_slice(piece: OutputSlice, selected: Collection[str]) -> Iterator[CandidateOutput]:
    """Stream the selected outputs of one slice (lines of unselected cases are skipped).

    Raises:
        OutputsChangedError: the slice no longer holds what the index pinned (other or fewer
            bytes, another S3 object, missing case ids), naming the file and the chunk.
    """
    try:
        if piece.format == "otlp":
            yield from _read_traces(piece, selected)
            return
        if piece.format == "transcript":
            yield from (o for o in _read_transcripts(piece) if o.case_id in selected)
            return
        data = _pinned_bytes(piece)
    except OutputsChangedError as exc:
        raise OutputsChangedError(exc.source, exc.problem, chunk=piece.chunk) from None
    for number, raw in enumerate(data.split(b"\n"), start=piece.first_line):
        stripped = raw.strip()
        if not stripped:
            continue
        record = parse_line(stripped, piece.path, number, piece.reader)
        if record.case_id in selected:
            yield record


def _pinned_bytes(part: ByteRange) -> bytes:
    """The bytes of a range, checked against the pins the index recorded for it."""
    data = OutputSource.of(part).read(part.start, part.end)
    if len(data) < part.end - part.start:
        raise OutputsChangedError(part.path, "the byte range is shorter than when it was indexed")
    if part.sha256 is not None and hashlib.sha256(data).hexdigest() != part.sha256:
        raise OutputsChangedError(
            part.path, "the byte range holds other bytes than when it was indexed"
        )
    return data


def _read_traces(piece: OutputSlice, selected: Collection[str]) -> Iterator[CandidateOutput]:
    from assay.intake.otlp.index import Range, TraceSlice, read_trace_slice

    assert piece.case_attribute is not None and piece.case_ids is not None
    parts = [piece, *piece.extra]
    ranges = [Range(r.path, r.start, r.end, r.first_line, r.sha256) for r in parts]
    traces = TraceSlice(case_ids=piece.case_ids, ranges=ranges)
    sources = {r.path: OutputSource.of(r) for r in parts}
    for case_id, record in read_trace_slice(
        traces, piece.case_attribute, selected, sources.__getitem__
    ):
        yield output_of(case_id, record)


def _read_transcripts(piece: OutputSlice) -> Iterator[CandidateOutput]:
    from assay.intake import transcripts

    assert piece.reader is not None and piece.case_ids is not None
    reader = transcripts.READERS[piece.reader]
    for case_id, part in zip(piece.case_ids, [piece, *piece.extra], strict=True):
        yield output_of(case_id, reader.read(_pinned_bytes(part), part.path))
