"""Calibration sets (SPEC §9): JSONL files of human-labelled items, appended to by `assay label`.

A set is never rewritten. It is the one place where output text is stored, because an operator
opts in by labelling it; every text field is clamped before it is written.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from assay import schemes
from assay.errors import InputError
from assay.jsonl import FirstLines, parse_record
from assay.outputs.index import index_outputs
from assay.outputs.slices import read_slice
from assay.outputs.sources import OutputSource
from assay.scorers import clamp
from assay.scorers.judge import LlmJudgeConfig
from assay.suites.suite import Suite

CONTENT_LIMIT: Final = 4000
"""Characters kept of each opted-in text field (input, output, rubric, expected)."""

Label = Literal["pass", "fail"]

NonEmpty = Annotated[str, StringConstraints(min_length=1)]


class CalibrationItem(BaseModel):
    """One human-labelled item: the case, the output, and a person's pass/fail."""

    model_config = ConfigDict(extra="forbid")

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


class LabelTask(BaseModel):
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


def tasks_to_label(suite: Suite, outputs: str, done: Collection[str]) -> Iterator[LabelTask]:
    """Every `llm_judge` check of the suite that has an output and no label in `done`, in order.

    The item id is `<case id>#<check position>@<first 12 hex of the output's SHA-256>`, so the
    same case with another agent's output is another item, and a resumed session skips exactly
    what was labelled.
    """
    judged = {
        case.id: [
            (position, spec.config.rubric)
            for position, spec in enumerate(suite.scorers_for(case))
            if isinstance(spec.config, LlmJudgeConfig)
        ]
        for case in suite.cases
    }
    wanted = [case_id for case_id, checks in judged.items() if checks]
    if not wanted:
        raise InputError(suite.suite, "the suite has no llm_judge checks: nothing to calibrate")
    cases = {case.id: case for case in suite.cases}
    index = index_outputs(outputs, cases.keys(), wanted, chunk_size=1000)
    for piece in index.slices:
        for output in read_slice(piece, set(wanted)):
            digest = hashlib.sha256(output.output.encode()).hexdigest()[:12]
            case = cases[output.case_id]
            for position, rubric in judged[case.id]:
                item_id = f"{case.id}#{position}@{digest}"
                if item_id not in done:
                    yield LabelTask(
                        item_id=item_id,
                        input=case.input,
                        expected=case.expected,
                        rubric=rubric,
                        output=output.output,
                    )
