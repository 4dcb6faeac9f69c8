"""Candidate outputs: JSON Lines (with messages in any format `assay.intake.messages` reads), OTLP
trace exports (`assay.intake.otlp`) or agent transcripts (`assay.intake.transcripts`) from a
file, a folder or an S3 prefix, streamed and validated.

Outputs never travel as data between pipeline steps. `index_outputs` validates the whole input in
one streaming pass and returns an `OutputsIndex` of byte ranges (`OutputSlice`s); each scoring
chunk then reads only its own slice. Memory stays flat whatever the input size, and nothing that
Prefect records (parameters, results) ever holds output text.

The index also *pins* what each slice must hold when its chunk reads it, later: the SHA-256 of
its bytes (hashed during the index pass, which reads every byte anyway) and, for S3, the
object's ETag and version. A slice that reads anything else raises `OutputsChangedError`.
"""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Final, Literal, cast, get_args
from urllib.parse import parse_qsl, urlencode

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import CoreSchema, SchemaValidator

from assay import schemes
from assay.errors import InputError, OutputsChangedError, shown
from assay.intake import messages as message_lists
from assay.intake.conversation import MessagesError
from assay.intake.record import AgentRecord, Evidence, TooManyCalls, UsageFigures, unseen_tools
from assay.jsonl import numbered_lines, parse_record
from assay.trajectory import Trajectory

if TYPE_CHECKING:
    from assay.intake.otlp.index import TraceSlice
    from assay.s3 import ObjectPin


class Usage(BaseModel):
    """Token usage and cost the agent reported for one output."""

    input_tokens: int | None = Field(default=None, ge=0)
    output_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)


MAX_TRIAL: Final = 1_000_000
"""The highest trial number an output may carry."""
OUTPUT_ONLY: Final = unseen_tools("a record with only `output` shows no tool calls")
"""What a JSONL line without `messages` could not show."""


class CandidateOutput(BaseModel):
    """One line of an outputs file. Only `case_id` and `output` are required; with `messages`
    (OpenAI Chat or Responses, Anthropic or LangChain: `assay.intake.messages`), `output`
    defaults to the agent's last answer, and the messages' tool calls are the output's
    trajectory. Outputs read from traces and transcripts carry the record their intake source
    built (`with_record`)."""

    model_config = ConfigDict(extra="ignore")

    case_id: str = Field(min_length=1)
    output: str
    trial: int | None = Field(default=None, ge=1, le=MAX_TRIAL)
    """Which repeated trial of the case this is; `(case_id, trial)` is unique (none reads as 1).
    `true`, an explicit `null` and numbers past `MAX_TRIAL` are refused."""
    duration_ms: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """A number too large for a float (`1e400`) reads as infinity, refused as not finite."""
    usage: Usage | None = None
    guardrail_triggers: int = Field(default=0, ge=0)
    messages: list[Any] | None = None

    @field_validator("trial", mode="before")
    @classmethod
    def _trial_is_a_number(cls, value: Any) -> Any:
        if value is None or isinstance(value, bool):
            raise ValueError("trial must be a whole number, 1 or more (or left out)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _text_from_messages(cls, data: Any) -> Any:
        if isinstance(data, dict) and "output" not in data:
            messages = data.get("messages")
            text = message_lists.final_text(messages) if isinstance(messages, list) else None
            if text is not None:
                return {**data, "output": text}
        return data

    # A cached property, not a private attribute: it is kept in the instance's `__dict__` only
    # once read or set, where pydantic neither validates, dumps nor compares it, while a private
    # attribute costs every instance pydantic's `init_private_attributes` (≈ 1.6 µs a line).
    @cached_property
    def record(self) -> AgentRecord | None:
        """What the output's messages tell (None for a line with `output` only).

        Raises:
            MessagesError: the messages do not read as their format (`parse_line` reports it).
        """
        return self.read_messages(None)

    def read_messages(self, named: str | None) -> AgentRecord | None:
        """The record of the output's messages, read as the format `named` (None: by shape).

        Raises:
            MessagesError: the messages do not read as their format.
        """
        if self.messages is None:
            return None
        found = message_lists.read(self.messages, named)
        if Evidence.TEXT in found.unseen:  # the line's `output` is the text
            found = replace(found, unseen=_without(found.unseen, Evidence.TEXT))
        return found

    @property
    def trajectory(self) -> Trajectory | None:
        """The tool calls the agent made, when the record shows them; None when it does not."""
        record = self.record
        if record is None or Evidence.TOOL_NAMES in record.unseen:
            return None
        return record.trajectory

    @property
    def unseen(self) -> Mapping[Evidence, str]:
        """What this output's record could not show (a check that needs it is unavailable)."""
        record = self.record
        return OUTPUT_ONLY if record is None else record.unseen

    def with_record(self, record: AgentRecord) -> CandidateOutput:
        """This output, carrying the record a trace or transcript gave."""
        self.record = record
        return self


def _without(unseen: Mapping[Evidence, str], evidence: Evidence) -> dict[Evidence, str]:
    return {key: why for key, why in unseen.items() if key is not evidence}


def output_of(case_id: str, record: AgentRecord) -> CandidateOutput:
    """A candidate output for a case read from a trace or transcript: its text ("" when the
    record captured none, whose text checks are then unavailable), duration and usage."""
    figures: UsageFigures = record.usage
    return CandidateOutput(
        case_id=case_id,
        output=record.text or "",
        duration_ms=record.duration_ms,
        usage=Usage(
            input_tokens=figures.input_tokens,
            output_tokens=figures.output_tokens,
            cost_usd=figures.cost_usd,
        )
        if figures.known
        else None,
    ).with_record(record)


def _without_before_validator(model: type[BaseModel]) -> SchemaValidator:
    """`model`'s own validation less its `mode="before"` model validator."""
    schema = cast(dict[str, Any], model.__pydantic_core_schema__)
    before = schema["schema"]
    assert schema["type"] == "model" and before["type"] == "function-before", schema["type"]
    return SchemaValidator(cast(CoreSchema, {**schema, "schema": before["schema"]}))


_GIVEN_OUTPUT: Final = _without_before_validator(CandidateOutput)
"""`CandidateOutput` for a line that gives `output`, whose before-validator would return it as it
is: pydantic then validates the JSON directly instead of building Python objects for the
validator first (≈ 30% of a parse)."""


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


OutputsFormat = Literal[
    "auto",
    "jsonl",
    "otlp",
    "openai-chat",
    "openai-responses",
    "anthropic",
    "langchain",
    "atif",
    "claude-code",
    "codex",
]
"""`auto` tells each file's format by its content; `jsonl` is outputs lines whose `messages`
are told by shape; a message-list format is outputs lines whose `messages` must be in it;
`otlp` is OTLP trace exports (JSON, JSON Lines or protobuf); the rest are transcripts."""
FORMAT_NAMES: Final = ", ".join(get_args(OutputsFormat))
DEFAULT_CASE_ATTRIBUTE: Final = "assay.case_id"


class OutputsReference(BaseModel):
    """Where outputs are and how to read them: a suite run carries it structured
    (`RunOptions.outputs`).

    Its string form — `PATH_OR_URI` alone reads JSONL or OTLP trace exports, told apart by
    content; `PATH_OR_URI?format=otlp&case_attribute=NAME` forces the format or names the case
    attribute — is what a run records and what readers given a string (`parse`) take.
    """

    location: str
    format: OutputsFormat = "auto"
    case_attribute: str = Field(default=DEFAULT_CASE_ATTRIBUTE, min_length=1, max_length=255)

    @classmethod
    def parse(cls, uri: str) -> OutputsReference:
        """Split a reference; a `?` followed by anything but these options is part of the path."""
        location, mark, query = uri.rpartition("?")
        options = dict(parse_qsl(query)) if mark else {}
        if not options or not options.keys() <= {"format", "case_attribute"}:
            return cls(location=uri)
        try:
            return cls(location=location, **options)
        except ValueError:
            raise InputError(uri, f"format must be one of {FORMAT_NAMES}") from None

    def __str__(self) -> str:
        options = {
            key: value
            for key, value in (("format", self.format), ("case_attribute", self.case_attribute))
            if value != type(self).model_fields[key].default
        }
        return f"{self.location}?{urlencode(options)}" if options else self.location


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
    accepted: Collection[str] = tuple(schemes.SCHEMES),
) -> list[OutputSource]:
    """The JSONL objects behind a reference, in key/path order: one file, every `*.jsonl` (or
    other `suffixes`) under a folder, every such object under an `s3://bucket/prefix/`, or
    inline outputs staged in this process (`inline://…`, see `assay.staging`). `what` names
    the input in errors; `accepted` are its schemes (see `assay.schemes`)."""
    return [OutputSource(name) for name in schemes.objects(uri, what, suffixes, accepted)]


def parse_line(raw: bytes, source: str, line: int, named: str | None = None) -> CandidateOutput:
    """Validate one outputs line (its `messages` read as the format `named`, else told by
    shape); errors name file, line and field, and never echo the text (nor a tool call's
    arguments)."""
    # A line that gives `output` and is valid reads through `_GIVEN_OUTPUT`; any other line, and
    # every failure, through the full model (which derives the text or reports the problem), so
    # a line reads and fails exactly as with the model alone. The test on the bytes only picks
    # the path: `"output"` cannot occur inside a JSON string (quotes there are escaped), and a
    # key spelt with escapes takes the full path. Bytes that are not UTF-8 never validate on the
    # fast path (pydantic's JSON parser checks every string): `parse_record` reports them.
    try:
        record: CandidateOutput | None = (
            _GIVEN_OUTPUT.validate_json(raw) if b'"output"' in raw else None
        )
    except ValidationError:
        record = None
    if record is None:
        record = parse_record(CandidateOutput, raw, source, line)
    if record.messages is not None:
        try:  # read here so that bad messages are an input error
            found = record.record = record.read_messages(named)
        except MessagesError as exc:
            raise InputError(source, exc.problem, line=line, field=exc.field) from None
        if record.usage is None and found is not None and found.usage.known:
            record.usage = Usage(  # the messages' own figures (LangChain's usage_metadata)
                input_tokens=found.usage.input_tokens,
                output_tokens=found.usage.output_tokens,
                cost_usd=found.usage.cost_usd,
            )
    return record


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


def index_outputs(
    uri: OutputsReference | str, known: Collection[str], selected: Collection[str], chunk_size: int
) -> OutputsIndex:
    """Validate every output (JSONL lines or OTLP traces) and cut the selected ones into slices
    of `chunk_size` cases.

    Args:
        uri: Outputs file or folder: an `OutputsReference`, or its string form.
        known: Every case id of the suite; an output for any other id is an input error.
        selected: The case ids this run scores (all, or a seeded sample), in suite order.
        chunk_size: Selected outputs per slice.

    Raises:
        InputError: malformed line, unknown case id or duplicate output — naming file and line.
    """
    reference = uri if isinstance(uri, OutputsReference) else OutputsReference.parse(uri)
    # Keyed by the case id for trial 1 (or none), by (case id, trial) for later trials: a run
    # without trials pays nothing for them.
    first_seen: dict[str | tuple[str, int], tuple[str, int]] = {}
    trialled: set[str] = set()
    """Cases with an output that carries `trial`."""
    wanted = selected if isinstance(selected, set | frozenset) else set(selected)

    def claim(case_id: str, source: str, line: int, field: str, trial: int | None = None) -> None:
        if case_id not in known:
            raise InputError(
                source, f"output for unknown case id {shown(case_id)}", line=line, field=field
            )
        key: str | tuple[str, int] = case_id if trial is None or trial == 1 else (case_id, trial)
        if key in first_seen:
            where, first = first_seen[key]
            of_trial = "" if trial is None else f" trial {trial}"
            raise InputError(
                source,
                f"duplicate output for case {shown(case_id)}{of_trial} (first at {where} line"
                f" {first})",
                line=line,
                field=field if trial is None else "trial",
            )
        first_seen[key] = (source, line)
        if trial is not None:
            trialled.add(case_id)

    slices: list[OutputSlice] = []
    traces: list[OutputSource] = []
    transcribed: list[tuple[OutputSource, str]] = []
    named = reference.format if reference.format not in ("auto", "jsonl", "otlp") else None
    for output, kind in formatted_sources(reference):
        if kind == "otlp":
            traces.append(output)
        elif kind == "jsonl":
            slices.extend(_index_jsonl(output, wanted, chunk_size, claim, named))
        else:
            transcribed.append((output, kind))
    slices.extend(_index_transcripts(transcribed, wanted, chunk_size, claim))
    without_text: set[str] = set()
    if traces:
        from assay.intake.otlp.index import index_traces

        found = index_traces(traces, reference.case_attribute, wanted, chunk_size, claim)
        pins = {source.name: source.pins() for source in traces}
        slices.extend(_trace_slice(piece, reference.case_attribute, pins) for piece in found.slices)
        without_text = found.without_text
    for number, piece in enumerate(slices):
        piece.chunk = number
    missing = [c for c in selected if c not in first_seen and c not in trialled]
    return OutputsIndex(
        slices=slices,
        seen=len(first_seen),
        missing=missing,
        without_text=len(without_text),
        without_text_example=next((c for c in selected if c in without_text), None)
        or min(without_text, default=None),
        trials=bool(trialled),
    )


def _trace_slice(
    piece: TraceSlice, case_attribute: str, pins: dict[str, dict[str, str | None]]
) -> OutputSlice:
    home, *others = piece.ranges
    return OutputSlice(
        path=home.path,
        start=home.start,
        end=home.end,
        first_line=home.first_line,
        sha256=home.sha256,
        **pins[home.path],
        cases=len(piece.case_ids),
        format="otlp",
        case_attribute=case_attribute,
        case_ids=piece.case_ids,
        extra=[
            ByteRange(
                path=r.path,
                start=r.start,
                end=r.end,
                first_line=r.first_line,
                sha256=r.sha256,
                **pins[r.path],
            )
            for r in others
        ],
    )


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


class _SliceHasher:
    """Hashes the bytes of the slice being cut while the index pass streams them (no second
    read). Blocks are held until hashed and hashed about once per block, not once per line; held
    blocks stay few even when a sparse sample spreads one slice over the whole file."""

    HELD_BLOCKS = 2

    def __init__(self) -> None:
        self._held: deque[tuple[int, bytes]] = deque()
        self._digest = hashlib.sha256()
        self._settled: hashlib._Hash | None = None
        """The digest up to `end`, once bytes after it (unselected lines) were fed."""
        self._fed = self.end = 0
        self.open = False

    def stream(self, blocks: Iterable[bytes]) -> Iterator[bytes]:
        offset = 0
        for block in blocks:
            self._held.append((offset, block))
            offset += len(block)
            yield block

    def selected(self, start: int, end: int) -> None:
        """A selected line, bytes [start, end): it opens a slice or extends the open one."""
        if not self.open:
            self.open, self._digest, self._fed, self._settled = True, hashlib.sha256(), start, None
        self.end, self._settled = end, None
        if len(self._held) > self.HELD_BLOCKS:
            self._feed(end)

    def passed(self, end: int) -> None:
        """An unselected line ending at `end`: inside the open slice only if a selected one
        follows, so the digest so far is kept aside before it is fed."""
        if not self.open:
            self._forget_before(end)
            return
        if len(self._held) > self.HELD_BLOCKS:
            if self._settled is None:
                self._feed(self.end)
                self._settled = self._digest.copy()
            self._feed(end)

    def close(self) -> str:
        """The open slice's digest, bytes [its start, `end`)."""
        self.open = False
        if self._settled is not None:
            return self._settled.hexdigest()
        self._feed(self.end)
        return self._digest.hexdigest()

    def _feed(self, end: int) -> None:
        for offset, block in self._held:
            if offset >= end:
                break
            if offset + len(block) > self._fed:
                self._digest.update(memoryview(block)[max(self._fed - offset, 0) : end - offset])
        self._fed = max(self._fed, end)
        self._forget_before(end)

    def _forget_before(self, end: int) -> None:
        while self._held and self._held[0][0] + len(self._held[0][1]) <= end:
            self._held.popleft()


def _index_transcripts(
    transcribed: list[tuple[OutputSource, str]],
    wanted: Collection[str],
    chunk_size: int,
    claim: Callable[[str, str, int, str, int | None], None],
) -> Iterator[OutputSlice]:
    """Transcripts, one case per file (read whole, to validate), cut into slices of up to
    `chunk_size` files of one format: the first file's range, the others as `extra`."""
    from assay.intake import transcripts

    batch: list[tuple[str, ByteRange]] = []
    batch_format = ""

    def cut() -> OutputSlice:
        (_, first), *others = batch
        return OutputSlice(
            **first.model_dump(),
            cases=len(batch),
            format="transcript",
            reader=batch_format,
            case_ids=[case_id for case_id, _ in batch],
            extra=[part for _, part in others],
        )

    for output, kind in transcribed:
        raw = b"".join(output.blocks())
        try:
            transcripts.READERS[kind].read(raw, output.name)
        except TooManyCalls as exc:  # the whole file is the output
            raise InputError(output.name, exc.problem) from None
        case_id = transcripts.case_id_of(output.name)
        claim(case_id, output.name, 1, "(file name)", None)
        if case_id not in wanted:
            continue
        if batch and (len(batch) == chunk_size or kind != batch_format):
            yield cut()
            batch = []
        batch_format = kind
        part = ByteRange(
            path=output.name,
            start=0,
            end=len(raw),
            first_line=1,
            sha256=hashlib.sha256(raw).hexdigest(),
            **output.pins(),
        )
        batch.append((case_id, part))
    if batch:
        yield cut()


def _read_transcripts(piece: OutputSlice) -> Iterator[CandidateOutput]:
    from assay.intake import transcripts

    assert piece.reader is not None and piece.case_ids is not None
    reader = transcripts.READERS[piece.reader]
    for case_id, part in zip(piece.case_ids, [piece, *piece.extra], strict=True):
        yield output_of(case_id, reader.read(_pinned_bytes(part), part.path))


def _index_jsonl(
    output: OutputSource,
    wanted: Collection[str],
    chunk_size: int,
    claim: Callable[[str, str, int, str, int | None], None],
    named: str | None = None,
) -> Iterator[OutputSlice]:
    source = output.name
    hasher = _SliceHasher()
    start, first_line, count = 0, 1, 0

    def cut() -> OutputSlice:
        end = hasher.end
        return OutputSlice(
            path=source,
            start=start,
            end=end,
            first_line=first_line,
            sha256=hasher.close(),
            **output.pins(),
            cases=count,
            reader=named,
        )

    for number, line_start, end, raw in numbered_lines(hasher.stream(output.blocks())):
        record = parse_line(raw, source, number, named)
        claim(record.case_id, source, number, "case_id", record.trial)
        if record.case_id not in wanted:
            hasher.passed(end)
            continue
        if count == 0:
            start, first_line = line_start, number
        hasher.selected(line_start, end)
        count += 1
        if count == chunk_size:
            yield cut()
            count = 0
    if count:
        yield cut()


def validate_outputs(uri: OutputsReference | str, known: Collection[str]) -> int:
    """Check every output line with the rules `index_outputs` (ingest) applies, keeping no text
    and no slices; returns how many valid lines were read. The CLI calls this before any Prefect
    API starts, so a bad file is answered at once; the flow's ingest still re-reads the file
    (see docs/cli.md, "Input errors")."""
    return index_outputs(uri, known, (), chunk_size=1).seen


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
