"""One outputs line read by `parse_line`: a line that gives `output` takes a fast path (the model's
validation without its before-validator); every line must read, and fail, exactly as the model
alone reads it, and the trajectory an output carries is never input nor dumped."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assay.errors import InputError
from assay.intake.record import AgentRecord
from assay.outputs.candidate import CandidateOutput, parse_line
from assay.trajectory import ToolCall, Trajectory

CANARY = "CANARY-8e41f0-tool-argument"
ASSISTANT = {"role": "assistant", "content": [{"type": "text", "text": "Refunded."}]}
TOOL_CALL = {
    "role": "assistant",
    "tool_calls": [{"id": "c1", "function": {"name": "refund", "arguments": '{"order": 42}'}}],
}


def raw(fields: dict[str, Any] | str) -> bytes:
    return (fields if isinstance(fields, str) else json.dumps(fields)).encode()


def error_of(line: bytes) -> InputError:
    with pytest.raises(InputError) as info:
        parse_line(line, "out.jsonl", 7)
    assert info.value.source == "out.jsonl" and info.value.line == 7
    return info.value


READS = [
    {"case_id": "c", "output": "plain"},
    {"case_id": "c", "output": "", "trial": 2, "duration_ms": 1.5, "guardrail_triggers": 1},
    {"case_id": "c", "output": 'says "output" inside', "usage": {"output_tokens": 3}},
    {"case_id": "c", "output": "given", "messages": [TOOL_CALL, ASSISTANT]},
    {"case_id": "c", "messages": [TOOL_CALL, ASSISTANT]},
    {"case_id": "c", "messages": [ASSISTANT], "extra": {"output": 1}},
    {"case_id": "c", "output": "kept", "output_note": "ignored", "trial": "3"},
]


@pytest.mark.parametrize("fields", READS)
def test_a_valid_line_reads_as_the_model_reads_it(fields: dict[str, Any]) -> None:
    record = parse_line(raw(fields), "out.jsonl", 1)
    alone = CandidateOutput.model_validate_json(raw(fields))
    assert type(record) is CandidateOutput
    assert record.model_dump() == alone.model_dump()
    assert record.model_fields_set == alone.model_fields_set
    assert record.output == fields.get("output", "Refunded.")


def test_an_escaped_output_key_still_reads() -> None:
    assert parse_line(b'{"case_id": "c", "\\u006futput": "text"}', "o", 1).output == "text"


@pytest.mark.parametrize(
    ("fields", "field", "problem"),
    [
        # No output and no assistant message: `output` is reported even when another field is
        # wrong too (a validator after the fields would report that field instead).
        ({"case_id": "c", "messages": "not a list", "trial": 0}, "output", "Field required"),
        ({"case_id": "c", "messages": [{"role": "user"}], "trial": 0}, "output", "Field required"),
        ({"case_id": "c", "messages": [ASSISTANT], "trial": 0}, "trial", "greater than or equal"),
        ({"case_id": "c", "output": "x", "trial": 0}, "trial", "greater than or equal"),
        ({"case_id": "c", "output": "x", "duration_ms": -1}, "duration_ms", "greater than"),
        ({"case_id": "", "output": "x"}, "case_id", "at least 1 character"),
        ({"case_id": "c", "output": 5}, "output", "valid string"),
        ({"case_id": "c", "output": "x", "messages": [{"content": "hi"}]}, "messages.0.role", ""),
        (
            {"case_id": "c", "output": "x", "messages": [{**TOOL_CALL, "tool_calls": [{}]}]},
            "messages.0.tool_calls.0.function",
            "Field required",
        ),
    ],
)
def test_a_bad_line_names_the_same_field_on_either_path(
    fields: dict[str, Any], field: str, problem: str
) -> None:
    error = error_of(raw(fields))
    assert error.field == field
    assert problem in error.problem


def test_bad_tool_call_arguments_are_reported_with_output_given_or_not() -> None:
    bad = {**TOOL_CALL, "tool_calls": [{"function": {"name": "refund", "arguments": "[" + CANARY}}]}
    for fields in (
        {"case_id": "c", "messages": [bad, ASSISTANT]},
        {"case_id": "c", "output": "x", "messages": [bad]},
    ):
        error = error_of(raw(fields))
        assert error.field == "messages[0].tool_calls[0].function.arguments"
        assert CANARY not in str(error)


@pytest.mark.parametrize(
    "line",
    [
        b'{"case_id": "c", "output": "x\xff"}',
        b'{"case_id": "c", "output": "x", "ignored": "\xc3"}',
        b'{"case_id": "c", "output": "x", "\xff": 1}',
        b'{"case_id": "c", "output": "x", "ignored": {"deep": ["\xed\xa0\x80"]}}',
        b'{"case_id": "c", "output": "x\xc0\xaf"}',
    ],
)
def test_bytes_that_are_not_utf8_are_reported_wherever_they_are(line: bytes) -> None:
    assert error_of(line).problem == "not UTF-8 text"


def test_a_trajectory_is_neither_input_nor_dumped() -> None:
    given = {"steps": [[{"tool": "refund", "args": {"note": CANARY}}]]}
    record = parse_line(raw({"case_id": "c", "output": "x", "trajectory": given}), "o", 1)
    assert record.trajectory is None
    spans = Trajectory(((ToolCall("refund", {"note": CANARY}),),))
    traced = CandidateOutput(case_id="c", output="x").with_record(
        AgentRecord(source="otlp", text="x", trajectory=spans)
    )
    assert traced.trajectory is spans
    assert CANARY not in traced.model_dump_json() and "trajectory" not in traced.model_dump()
    assert CANARY not in repr(traced)


def test_a_trajectory_from_messages_is_parsed_once() -> None:
    record = parse_line(raw({"case_id": "c", "messages": [TOOL_CALL, ASSISTANT]}), "o", 1)
    assert record.trajectory is record.trajectory
    assert record.trajectory == Trajectory(((ToolCall("refund", {"order": 42}, "c1"),),))


@pytest.mark.parametrize("trial", [b"true", b"null", b"1e30", b"1000000000000000000000000000000"])
def test_a_trial_must_be_a_whole_number_within_bounds_on_either_path(trial: bytes) -> None:
    for line in (
        b'{"case_id": "c", "output": "x", "trial": ' + trial + b"}",
        b'{"case_id": "c", "messages": [{"role": "assistant", "content": "x"}], "trial": '
        + trial
        + b"}",
    ):
        error = error_of(line)
        assert error.field == "trial"
