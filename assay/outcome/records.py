"""Invocation records: the JSON Lines the outcome score reads, validated without echoing text.

One invocation per line:

    {"invocation_id": "inv-1", "subject": "agent:support-bot@v2", "query_class": "refunds",
     "intent": "Can I return shoes after 40 days?", "response": "No: returns close at 30 days.",
     "ground_truth": "No, 30 days.", "required_elements": ["30-day window"],
     "context": "Policy: returns within 30 days.", "duration_ms": 1800, "guardrail_triggers": 0}

`ground_truth`, `required_elements` and `context` are optional; everything else is required.
`response` (and the other texts) are read, scored and dropped: they live only in the memory of
the task that scores them, and error messages never quote them (`include_input=False`).

The file is read twice, streamed: `check_records` validates every line (and that invocation
ids are unique) before anything is spent or written, then `read_records` yields the records
again, in order, for scoring.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from assay import schemes
from assay.errors import InputError, shown
from assay.jsonl import numbered_lines, parse_record
from assay.outputs.sources import OutputSource, output_sources
from assay.subject import Subject


class OutcomeRecord(BaseModel):
    """One invocation to score. The texts are kept out of `repr` (they may reach a log line)."""

    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)

    invocation_id: str = Field(min_length=1)
    subject: str
    """`KIND:ID[@VARIANT]`, e.g. `agent:support-bot@v2`."""
    query_class: str = Field(min_length=1)
    intent: str = Field(repr=False)
    response: str = Field(repr=False)
    ground_truth: str | None = Field(default=None, repr=False)
    required_elements: list[str] | None = Field(default=None, repr=False)
    context: str | None = Field(default=None, repr=False)
    duration_ms: float = Field(ge=0, allow_inf_nan=False)
    guardrail_triggers: int = Field(ge=0)

    @field_validator("subject")
    @classmethod
    def _subject(cls, subject: str) -> str:
        try:
            return str(Subject.parse(subject))
        except InputError:
            raise ValueError("is not KIND:ID[@VARIANT] (e.g. agent:support-bot@v2)") from None


def _parse(raw: bytes, source: str, line: int) -> OutcomeRecord:
    return parse_record(OutcomeRecord, raw, source, line)


def _sources(reference: str) -> list[OutputSource]:
    return output_sources(reference, what="records", accepted=schemes.SHARED)


def read_records(path: str | Path) -> Iterator[OutcomeRecord]:
    """The records of a JSONL file or folder (every `*.jsonl`, in path order), streamed.

    Raises:
        InputError: A missing file, a malformed line or field — naming file, line and field.
    """
    for source in _sources(str(path)):
        for number, _, _, raw in numbered_lines(source.blocks()):
            yield _parse(raw, source.name, number)


def check_records(path: str | Path) -> int:
    """Validate every record and the uniqueness of invocation ids; return how many there are.

    Raises:
        InputError: A malformed record, a duplicate invocation id, or no records at all.
    """
    reference = str(path)
    seen: dict[str, tuple[str, int]] = {}
    for source in _sources(reference):
        for number, _, _, raw in numbered_lines(source.blocks()):
            record = _parse(raw, source.name, number)
            first = seen.get(record.invocation_id)
            if first is not None:
                raise InputError(
                    source.name,
                    f"duplicate invocation id {shown(record.invocation_id)} "
                    f"(first at {first[0]} line {first[1]})",
                    line=number,
                    field="invocation_id",
                )
            seen[record.invocation_id] = (source.name, number)
    if not seen:
        raise InputError(reference, "no invocation records")
    return len(seen)
