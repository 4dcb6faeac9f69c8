"""Candidate outputs: JSON Lines from a file, a folder or an S3 prefix, streamed and validated.

Outputs never travel as data between pipeline steps. `index_outputs` validates the whole input in
one streaming pass and returns an `OutputsIndex` of byte ranges (`OutputSlice`s); each scoring
chunk then reads only its own slice. Memory stays flat whatever the input size, and nothing that
Prefect records (parameters, results) ever holds output text.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from assay.errors import InputError
from assay.jsonl import numbered_lines, parse_record

if TYPE_CHECKING:
    from assay.s3 import ObjectReader


class Usage(BaseModel):
    """Token usage and cost the agent reported for one output."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0)


class CandidateOutput(BaseModel):
    """One line of an outputs file. Only `case_id` and `output` are required."""

    model_config = ConfigDict(extra="ignore")

    case_id: str = Field(min_length=1)
    output: str
    duration_ms: float | None = Field(default=None, ge=0)
    usage: Usage | None = None
    guardrail_triggers: int = Field(default=0, ge=0)


class OutputSlice(BaseModel):
    """A run of whole lines in one outputs object: bytes [start, end), first line `first_line`."""

    path: str
    """Local path or `s3://bucket/key`."""
    start: int
    end: int
    first_line: int
    cases: int


class OutputsIndex(BaseModel):
    """Where every selected output lives, and which selected cases have none."""

    slices: list[OutputSlice]
    seen: int
    """Valid output lines read (selected or not)."""
    missing: list[str]
    """Selected case ids with no output, in the order given."""


BLOCK_SIZE = 4 * 1024 * 1024


class OutputSource:
    """One JSONL object: a local file or an S3 object, read in blocks or by byte range."""

    def __init__(self, name: str) -> None:
        self.name = name
        """`/path/file.jsonl` or `s3://bucket/key.jsonl`: what errors and slices name."""

    def read(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object."""
        if self.name.startswith("s3://"):
            bucket, key = _split_s3(self.name)
            return _reader().read(bucket, key, start, end)
        with open(self.name, "rb") as handle:
            handle.seek(start)
            return handle.read(end - start)

    def blocks(self) -> Iterator[bytes]:
        """The whole object, streamed in blocks (memory stays flat for any size)."""
        offset = 0
        while True:
            block = self.read(offset, offset + BLOCK_SIZE)
            if not block:
                return
            yield block
            offset += len(block)


def _split_s3(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _reader() -> ObjectReader:
    return _reader_at(os.environ.get("AWS_ENDPOINT_URL"))


@lru_cache(maxsize=4)
def _reader_at(endpoint: str | None) -> ObjectReader:
    from assay.s3 import ObjectReader, make_client

    return ObjectReader(make_client(endpoint_url=endpoint))


def output_sources(uri: str) -> list[OutputSource]:
    """The JSONL objects behind an outputs reference, in key/path order: one file, every
    `*.jsonl` under a folder, or every `.jsonl` object under an `s3://bucket/prefix/`."""
    if uri.startswith("s3://"):
        from assay.s3 import parse_s3_uri

        bucket, prefix = parse_s3_uri(uri)
        keys = [k for k in _reader().keys(bucket, prefix) if k.endswith(".jsonl")]
        if not keys:
            raise InputError(uri, "no .jsonl objects under this S3 prefix")
        return [OutputSource(f"s3://{bucket}/{key}") for key in keys]
    path = Path(uri.removeprefix("file://"))
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.jsonl") if p.is_file())
        if not files:
            raise InputError(uri, "the folder holds no .jsonl files")
        return [OutputSource(str(p)) for p in files]
    if not path.is_file():
        raise InputError(uri, "no such outputs file or folder")
    return [OutputSource(str(path))]


def parse_line(raw: bytes, source: str, line: int) -> CandidateOutput:
    """Validate one outputs line; errors name file, line and field, and never echo the text."""
    return parse_record(CandidateOutput, raw, source, line)


def index_outputs(
    uri: str, known: Collection[str], selected: Collection[str], chunk_size: int
) -> OutputsIndex:
    """Validate every output line and cut the selected ones into slices of `chunk_size` cases.

    Args:
        uri: Outputs file or folder.
        known: Every case id of the suite; an output for any other id is an input error.
        selected: The case ids this run scores (all, or a seeded sample), in suite order.
        chunk_size: Selected outputs per slice.

    Raises:
        InputError: malformed line, unknown case id or duplicate output — naming file and line.
    """
    first_seen: dict[str, tuple[str, int]] = {}
    wanted = selected if isinstance(selected, set | frozenset) else set(selected)
    slices: list[OutputSlice] = []
    for output in output_sources(uri):
        source = output.name
        start, first_line, count, previous_end = 0, 1, 0, 0
        for number, line_start, end, raw in numbered_lines(output.blocks()):
            record = parse_line(raw, source, number)
            case_id = record.case_id
            if case_id not in known:
                raise InputError(
                    source, f"output for unknown case id {case_id!r}", line=number, field="case_id"
                )
            if case_id in first_seen:
                where, line = first_seen[case_id]
                raise InputError(
                    source,
                    f"duplicate output for case {case_id!r} (first at {where} line {line})",
                    line=number,
                    field="case_id",
                )
            first_seen[case_id] = (source, number)
            if case_id not in wanted:
                continue
            if count == 0:
                start, first_line = line_start, number
            count += 1
            previous_end = end
            if count == chunk_size:
                slices.append(
                    OutputSlice(
                        path=source, start=start, end=end, first_line=first_line, cases=count
                    )
                )
                count = 0
        if count:
            slices.append(
                OutputSlice(
                    path=source, start=start, end=previous_end, first_line=first_line, cases=count
                )
            )
    missing = [case_id for case_id in selected if case_id not in first_seen]
    return OutputsIndex(slices=slices, seen=len(first_seen), missing=missing)


def read_slice(piece: OutputSlice, selected: Collection[str]) -> Iterator[CandidateOutput]:
    """Stream the selected outputs of one slice (lines of unselected cases are skipped)."""
    data = OutputSource(piece.path).read(piece.start, piece.end)
    for number, raw in enumerate(data.split(b"\n"), start=piece.first_line):
        stripped = raw.strip()
        if not stripped:
            continue
        record = parse_line(stripped, piece.path, number)
        if record.case_id in selected:
            yield record
