"""One candidate output (`CandidateOutput`): a line of outputs JSON Lines, or what a trace or
transcript gave for a case (`output_of`), and parsing a line with errors that name file, line and
field (`parse_line`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from functools import cached_property
from typing import Any, Final, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import CoreSchema, SchemaValidator

from assay.errors import InputError
from assay.intake import messages as message_lists
from assay.intake.conversation import MessagesError
from assay.intake.record import AgentRecord, Evidence, UsageFigures, unseen_tools
from assay.jsonl import parse_record
from assay.trajectory import Trajectory


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
