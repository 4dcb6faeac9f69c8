"""The objects behind an outputs reference (`OutputSource`: a file, an S3 object or staged
inline outputs, read in blocks or by byte range) and how each is read (`formatted_sources`)."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from typing import TYPE_CHECKING, Final

from assay import schemes
from assay.errors import InputError
from assay.outputs.reference import OutputsReference

if TYPE_CHECKING:
    from assay.outputs.slices import ByteRange
    from assay.s3 import ObjectPin


BLOCK_SIZE = 4 * 1024 * 1024


class OutputSource:
    """One JSONL object: a local file or an S3 object, read in blocks or by byte range.

    An S3 object is pinned by its first read (ETag and version); every later read of the same
    source, and of a slice that carries the pin, must find that object or raises
    `OutputsChangedError`.
    """

    def __init__(self, name: str, pin: ObjectPin | None = None) -> None:
        self.name = name
        """`/path/file.jsonl` or `s3://bucket/key.jsonl`: what errors and slices name."""
        self.pin = pin

    @classmethod
    def of(cls, part: ByteRange) -> OutputSource:
        """The source of a range, pinned as the range was indexed."""
        if part.etag is None:
            return cls(part.path)
        from assay.s3 import ObjectPin

        return cls(part.path, ObjectPin(etag=part.etag, version_id=part.version_id))

    def pins(self) -> dict[str, str | None]:
        """The pin fields a range of this source carries."""
        if self.pin is None:
            return {}
        return {"etag": self.pin.etag, "version_id": self.pin.version_id}

    def read(self, start: int, end: int) -> bytes:
        """Bytes [start, end) of the object."""
        data, pin = schemes.read(self.name, start, end, self.pin)
        self.pin = self.pin or pin
        return data

    def blocks(self) -> Iterator[bytes]:
        """The whole object, streamed in blocks (memory stays flat for any size)."""
        offset = 0
        while True:
            block = self.read(offset, offset + BLOCK_SIZE)
            if not block:
                return
            yield block
            offset += len(block)


def output_sources(
    uri: str,
    suffixes: tuple[str, ...] = (".jsonl",),
    what: str = "outputs",
    accepted: Collection[str] = schemes.SCHEMES,
) -> list[OutputSource]:
    """The JSONL objects behind a reference, in key/path order: one file, every `*.jsonl` (or
    other `suffixes`) under a folder, every such object under an `s3://bucket/prefix/`, or
    inline outputs staged in this process (`inline://…`, see `assay.staging`). `what` names
    the input in errors; `accepted` are its schemes (see `assay.schemes`)."""
    return [OutputSource(name) for name in schemes.objects(uri, what, suffixes, accepted)]


TRACE_SUFFIXES: Final = (".jsonl", ".json", ".pb", ".binpb", ".protobuf")
UNKNOWN_FORMAT: Final = (
    "not a known outputs format: not outputs JSON Lines, OTLP JSON, OTLP protobuf, ATIF,"
    " a Claude Code session nor a Codex rollout"
)


def formatted_sources(reference: OutputsReference) -> list[tuple[OutputSource, str]]:
    """Each object behind `reference` and how to read it: `jsonl`, `otlp` or a transcript
    format (`assay.intake.transcripts`).

    Auto-detection reads the first bytes of each object. A folder or prefix also offers its
    `.json` and protobuf (`.pb`, `.binpb`) objects, which are taken only when they are trace
    exports or transcripts (or a format is named).
    """
    from assay.intake import messages, transcripts
    from assay.otel.traces import looks_like_protobuf, looks_like_traces

    named = reference.format
    if named == "jsonl" or named in messages.READERS:
        return [(source, "jsonl") for source in output_sources(reference.location)]
    if named in transcripts.READERS:
        return [(s, named) for s in output_sources(reference.location, (".jsonl", ".json"))]
    sources = output_sources(reference.location, TRACE_SUFFIXES)
    if named == "otlp":
        return [(source, "otlp") for source in sources]
    chosen: list[tuple[OutputSource, str]] = []
    for source in sources:
        head = source.read(0, transcripts.HEAD_BYTES)
        if looks_like_traces(head[:256]) or looks_like_protobuf(head):
            chosen.append((source, "otlp"))
        elif (transcript := transcripts.detect(head)) is not None:
            chosen.append((source, transcript))
        elif source.name.endswith(".jsonl") or len(sources) == 1:
            opening = head.removeprefix(b"\xef\xbb\xbf").lstrip()  # a BOM is named later
            if len(sources) == 1 and opening and opening[:1] != b"{":
                raise InputError(source.name, UNKNOWN_FORMAT)
            chosen.append((source, "jsonl"))
    return chosen
