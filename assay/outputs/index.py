"""The one validating pass over outputs (`index_outputs`): every line or trace checked (malformed,
unknown case id, duplicate), the selected cases cut into pinned slices, hashed as they stream."""

from __future__ import annotations

import hashlib
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from typing import TYPE_CHECKING

from assay.errors import InputError, shown
from assay.intake.record import TooManyCalls
from assay.jsonl import numbered_lines
from assay.outputs.candidate import parse_line
from assay.outputs.reference import OutputsReference
from assay.outputs.slices import ByteRange, OutputsIndex, OutputSlice
from assay.outputs.sources import OutputSource, formatted_sources

if TYPE_CHECKING:
    from assay.intake.otlp.index import TraceSlice


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
