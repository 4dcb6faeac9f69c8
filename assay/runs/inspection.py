"""`assay outputs inspect`: what Assay reads from a set of records, without scoring, storing or
starting Prefect — per file the format detected, per case its turns and tool calls by name and
step, what the record could show, and (given a suite) which checks would be unavailable and why.

Nothing here carries text or argument values: turns are counted by role, calls named by tool
(a name that does not look like one is not echoed), reasons worded from the format.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from assay.errors import InputError
from assay.intake.record import AgentRecord, Evidence, TooManyCalls
from assay.trajectory import TOOL_NAME

if TYPE_CHECKING:
    from assay.intake.otlp.book import Conversation
    from assay.outputs.candidate import CandidateOutput
    from assay.outputs.reference import OutputsReference
    from assay.suites.suite import Suite


class InspectedFile(BaseModel):
    path: str
    format: str
    """`jsonl`, `otlp` or a transcript format."""
    cases: int


class InspectedCall(BaseModel):
    tool: str
    step: int
    """1-based; calls of one step were requested together."""
    failed: bool


class InspectedCase(BaseModel):
    case_id: str
    trial: int | None = None
    source: str
    """The format that read it (`output` for a line with only `output`)."""
    file: str
    turns: dict[str, int] = Field(default_factory=dict)
    """Messages by role."""
    steps: int
    calls: list[InspectedCall]
    has_text: bool
    usage: dict[str, float] = Field(default_factory=dict)
    shows: list[Evidence]
    unseen: dict[Evidence, str]
    """Evidence the record could not show, with why."""
    unavailable: list[str] = Field(default_factory=list)
    """With a suite: `KIND (label): why` for each check that would be unavailable."""
    traces: int | None = None
    """OTLP: how many traces the record was read from (more than one: a conversation's traces,
    joined by `joined_by`)."""
    joined_by: str | None = None
    """The conversation attribute that joined its traces."""


class Inspection(BaseModel):
    files: list[InspectedFile]
    cases: list[InspectedCase]
    unknown_cases: list[str] = Field(default_factory=list)
    """With a suite: case ids of records the suite does not have."""
    missing_cases: list[str] = Field(default_factory=list)
    """With a suite: the suite's cases no record is for."""


def _name(tool: str) -> str:
    return tool if TOOL_NAME.fullmatch(tool) else "(a tool with an unusual name)"


def _records(
    reference: OutputsReference,
) -> Iterator[tuple[str, str, CandidateOutput, Conversation | None]]:
    """(file, format, output, its traces when OTLP) for every record behind `reference`, every
    case of every file."""
    from assay.intake import transcripts
    from assay.intake.otlp.index import TraceBook, read_documents
    from assay.jsonl import numbered_lines
    from assay.outputs.candidate import output_of, parse_line
    from assay.outputs.sources import formatted_sources

    named = reference.format if reference.format not in ("auto", "jsonl", "otlp") else None
    for source, kind in formatted_sources(reference):
        if kind == "jsonl":
            for number, _start, _end, raw in numbered_lines(source.blocks()):
                yield source.name, kind, parse_line(raw, source.name, number, named), None
            continue
        try:
            if kind == "otlp":
                book = TraceBook(reference.case_attribute, keep_spans=True)
                read_documents(book, source, None)
                for read in book.conversations():
                    yield source.name, kind, output_of(read.case_id, read.read()), read
            else:
                raw = b"".join(source.blocks())
                record = transcripts.READERS[kind].read(raw, source.name)
                case_id = transcripts.case_id_of(source.name)
                yield source.name, kind, output_of(case_id, record), None
        except TooManyCalls as exc:
            raise InputError(source.name, exc.problem) from None


def inspect_outputs(reference: OutputsReference, suite: Suite | None = None) -> Inspection:
    """What Assay reads from the records behind `reference` (see the module docstring).

    Raises:
        InputError: a record that does not read, naming file, line and field.
    """
    files: dict[str, InspectedFile] = {}
    cases: list[InspectedCase] = []
    compiled = None
    if suite is not None:
        from assay.runs.scoring import CompiledSuite

        compiled = CompiledSuite.compile(suite)
    unknown: list[str] = []
    for path, kind, output, conversation in _records(reference):
        shown = files.setdefault(path, InspectedFile(path=path, format=kind, cases=0))
        shown.cases += 1
        record: AgentRecord | None = output.record
        trajectory = output.trajectory
        steps = trajectory.steps if trajectory is not None else ()
        unseen = dict(output.unseen)
        figures = {
            key: value
            for key, value in (output.usage.model_dump() if output.usage else {}).items()
            if value is not None
        }
        case = InspectedCase(
            case_id=output.case_id,
            trial=output.trial,
            source=record.source if record is not None else "output",
            file=path,
            turns=dict(Counter(turn.role for turn in record.turns)) if record else {},
            steps=len(steps),
            calls=[
                InspectedCall(tool=_name(call.tool), step=k, failed=call.failed)
                for k, step in enumerate(steps, start=1)
                for call in step
            ],
            has_text=Evidence.TEXT not in unseen,
            usage=figures,
            shows=[evidence for evidence in Evidence if evidence not in unseen],
            unseen=unseen,
            traces=len(conversation.traces) if conversation else None,
            joined_by=(
                conversation.attribute if conversation and len(conversation.traces) > 1 else None
            ),
        )
        if compiled is not None:
            if output.case_id not in compiled.cases:
                unknown.append(output.case_id)
            else:
                case.unavailable = [
                    f"{scorer.name} ({scorer.label}): {why}"
                    for scorer in compiled.scorers[output.case_id]
                    for why in [next((unseen[e] for e in scorer.needs if e in unseen), None)]
                    if why is not None
                ]
        cases.append(case)
    seen = {case.case_id for case in cases}
    return Inspection(
        files=list(files.values()),
        cases=cases,
        unknown_cases=unknown,
        missing_cases=[c for c in compiled.cases if c not in seen] if compiled else [],
    )
