"""Calibration sets (SPEC §9): JSONL files of human-labelled items, appended to by `assay label`.

A set is never rewritten. It is the one place where output text is stored, because an operator
opts in by labelling it; every text field is clamped before it is written.

An item labels what one judged check reads (docs/conversations.md, "Judging a conversation"):
a case's final answer (`on: output`), its trajectory (`on: trajectory`), its whole conversation
(`on: conversation`: `output` holds the messages under their role headers, as the judge reads
them), or one turn of a conversation case (`turn: j`: `output` holds that turn's answer). Items
written before these fields read as `on: output` with no case or turn.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from assay import schemes
from assay.errors import InputError
from assay.jsonl import FirstLines, parse_record
from assay.judge.prompts import conversation_block
from assay.outputs.candidate import CandidateOutput
from assay.outputs.index import index_outputs
from assay.outputs.slices import read_slice
from assay.outputs.sources import OutputSource
from assay.scorers import clamp
from assay.scorers.judge import Judged, LlmJudgeConfig
from assay.suites.suite import Case, Suite
from assay.trajectory import rendered

CONTENT_LIMIT: Final = 4000
"""Characters kept of each opted-in text field (input, output, rubric, expected)."""

Label = Literal["pass", "fail"]

NonEmpty = Annotated[str, StringConstraints(min_length=1)]


class Target(BaseModel):
    """What an item labels: which case, which turn of it, and what its judged check reads."""

    model_config = ConfigDict(extra="forbid")

    case_id: str | None = Field(default=None, exclude_if=lambda case_id: case_id is None)
    """The suite case; None in items written before it was recorded."""
    turn: int | None = Field(default=None, ge=1, exclude_if=lambda turn: turn is None)
    """Turn j (from 1) of the case's conversation, whose answer `output` holds; None: the
    case as a whole (its final answer, trajectory or conversation, as `on` says)."""
    on: Judged = Field(default="output", exclude_if=lambda on: on == "output")
    """What the judge reads: `output` holds the final text, the rendered trajectory, or the
    whole conversation under its turn headers; a conversation item is asked with the
    conversation frame before its rubric (or the template it names)."""

    @model_validator(mode="after")
    def _turn_of_a_case(self) -> Target:
        if self.turn is not None and (self.case_id is None or self.on == "conversation"):
            raise ValueError("a turn item needs its case_id, and labels that turn's answer")
        return self


class CalibrationItem(Target):
    """One human-labelled item: the case, the output, and a person's pass/fail."""

    item_id: NonEmpty
    input: str
    output: str = Field(repr=False)
    rubric: NonEmpty
    expected: str | None = None
    label: Label
    labeler: NonEmpty
    labeled_at: datetime

    def clamped(self) -> CalibrationItem:
        """The item with every text field cut to `CONTENT_LIMIT` characters (before writing)."""
        return self.model_copy(
            update={
                "input": clamp(self.input, CONTENT_LIMIT),
                "output": clamp(self.output, CONTENT_LIMIT),
                "rubric": clamp(self.rubric, CONTENT_LIMIT),
                "expected": None if self.expected is None else clamp(self.expected, CONTENT_LIMIT),
            }
        )


def load_set(path: str | Path) -> list[CalibrationItem]:
    """Read a calibration set (a local file or an `s3://` object); malformed lines and repeated
    item ids name file and line."""
    source = str(path)
    items: list[CalibrationItem] = []
    first_lines = FirstLines(source, "item id", "item_id")
    try:
        data = b"".join(OutputSource(schemes.one_object(source, "calibration set")).blocks())
        lines = data.decode("utf-8").split("\n")
    except OSError as exc:
        raise InputError(source, f"cannot read the calibration set ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(source, "the calibration set is not UTF-8 text") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        item = parse_record(CalibrationItem, line, source, number)
        first_lines.claim(item.item_id, number)
        items.append(item)
    return items


def append_item(path: str | Path, item: CalibrationItem) -> None:
    """Append one clamped item to a set (durably: the line is on disk when this returns)."""
    line = item.clamped().model_dump_json() + "\n"
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


class LabelTask(Target):
    """One judged check of a suite case with its output, waiting for a person's label."""

    item_id: str
    input: str
    expected: str | None
    rubric: str
    output: str = Field(repr=False)

    def labelled(self, label: Label, labeler: str, now: datetime | None = None) -> CalibrationItem:
        """The calibration item a person's label turns this task into."""
        return CalibrationItem(
            **self.model_dump(), label=label, labeler=labeler, labeled_at=now or datetime.now(UTC)
        )


_Check = tuple[str, int | None, LlmJudgeConfig, str | None]
"""(item id prefix, turn or None, the check, the reference answer it is judged against)."""


def _judged_checks(suite: Suite, case: Case) -> list[_Check]:
    """The case's `llm_judge` checks, then those of each of its turns."""
    checks: list[_Check] = [
        (f"{case.id}#{position}", None, spec.config, case.expected)
        for position, spec in enumerate(suite.scorers_for(case))
        if isinstance(spec.config, LlmJudgeConfig)
    ]
    for number, turn in enumerate(case.turns or (), start=1):
        checks += [
            (f"{case.id}#t{number}.{position}", number, spec.config, turn.expected)
            for position, spec in enumerate(suite.turn_scorers(turn))
            if isinstance(spec.config, LlmJudgeConfig)
        ]
    return checks


def _read(output: CandidateOutput, turn: int | None, on: Judged) -> str | None:
    """What a check of `output` reads (its turn's answer, its trajectory or conversation
    rendered as the judge reads them); None when the record does not show it."""
    record = output.record
    if turn is not None:
        conversation = () if record is None else record.conversation()
        if turn > len(conversation) or on == "conversation":
            return None
        exchange = conversation[turn - 1]
        if on == "trajectory":
            return None if output.trajectory is None else rendered(exchange.trajectory)
        return exchange.text
    if on == "conversation":
        if record is None or not record.turns:
            return None
        return conversation_block([(message.role, message.text) for message in record.turns])
    if on == "trajectory":
        return None if output.trajectory is None else rendered(output.trajectory)
    return output.output


def tasks_to_label(suite: Suite, outputs: str, done: Collection[str]) -> Iterator[LabelTask]:
    """Every `llm_judge` check of the suite — a case's, or a turn's — that has what it reads in
    the outputs and no label in `done`, in order.

    The item id is `<case id>#<check position>@<digest>` (`<case id>#t<turn>.<position>@…` for a
    turn's check), the digest the first 12 hex of the SHA-256 of what is labelled, so the same
    case with another agent's output is another item, and a resumed session skips exactly what
    was labelled.
    """
    judged = {case.id: _judged_checks(suite, case) for case in suite.cases}
    wanted = [case_id for case_id, checks in judged.items() if checks]
    if not wanted:
        raise InputError(suite.suite, "the suite has no llm_judge checks: nothing to calibrate")
    cases = {case.id: case for case in suite.cases}
    index = index_outputs(outputs, cases.keys(), wanted, chunk_size=1000)
    for piece in index.slices:
        for output in read_slice(piece, set(wanted)):
            case = cases[output.case_id]
            for prefix, turn, config, expected in judged[case.id]:
                text = _read(output, turn, config.on)
                if text is None:
                    continue
                item_id = f"{prefix}@{hashlib.sha256(text.encode()).hexdigest()[:12]}"
                if item_id not in done:
                    yield LabelTask(
                        item_id=item_id,
                        case_id=case.id,
                        turn=turn,
                        on=config.on,
                        input=case.input,
                        expected=expected,
                        rubric=config.rubric,
                        output=text,
                    )
