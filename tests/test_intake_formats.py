"""Formats told apart and named: a file in no known format, protobuf trace files, a message
format named with `--outputs-format`, and errors that name the field and never a value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.errors import InputError
from assay.intake.record import Evidence
from assay.outputs.candidate import parse_line
from assay.outputs.index import index_outputs
from assay.outputs.reference import OutputsReference
from assay.outputs.slices import read_slice

CANARY = "CANARY-intake-formats"


def outputs(location: Path | str, ids: list[str], **given: Any) -> list[Any]:
    reference = OutputsReference(location=str(location), **given)
    index = index_outputs(reference, set(ids), ids, 10)
    return [o for piece in index.slices for o in read_slice(piece, set(ids))]


def test_a_file_in_no_known_format_is_one_line_naming_what_was_tried(tmp_path: Path) -> None:
    path = tmp_path / "export.bin"
    path.write_bytes(b"\x00\x01 not anything " + CANARY.encode())
    with pytest.raises(InputError) as info:
        outputs(path, ["a"])
    assert str(info.value) == (
        f"{path}: not a known outputs format: not outputs JSON Lines, OTLP JSON, OTLP protobuf,"
        " ATIF, a Claude Code session nor a Codex rollout"
    )


def test_a_protobuf_file_that_is_not_a_trace_export_says_so(tmp_path: Path) -> None:
    path = tmp_path / "traces.pb"
    path.write_bytes(b"\x0a\xff\xff\xff\x0f" + CANARY.encode())
    with pytest.raises(InputError) as info:
        outputs(path, ["a"])
    assert "not OTLP JSON, OTLP JSON Lines nor OTLP protobuf" in str(info.value)
    assert CANARY not in str(info.value)


def test_protobuf_files_in_a_folder_are_read_beside_jsonl(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    from tests.otel_agent import tool_agent_traces

    spans = tool_agent_traces(
        [{"case_id": "traced", "text": "hi", "steps": [[("lookup", {"q": 1}, False)]]}]
    )
    (tmp_path / "traces.pb").write_bytes(encode_spans(spans).SerializeToString())
    (tmp_path / "lines.jsonl").write_text(json.dumps({"case_id": "plain", "output": "x"}) + "\n")
    got = {o.case_id: o for o in outputs(tmp_path, ["traced", "plain"])}
    assert got["traced"].output == "hi"
    assert [c.tool for c in got["traced"].trajectory.calls] == ["lookup"]
    assert Evidence.TOOL_NAMES in got["plain"].unseen


ANTHROPIC = [
    {"role": "user", "content": "q"},
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {"q": CANARY}}],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": "x"}],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
]


def test_a_named_message_format_refuses_messages_of_another(tmp_path: Path) -> None:
    line = json.dumps({"case_id": "a", "messages": ANTHROPIC}).encode()
    assert parse_line(line, "o.jsonl", 1, "anthropic").trajectory is not None
    with pytest.raises(InputError) as info:
        parse_line(line, "o.jsonl", 4, "langchain")
    assert (info.value.line, info.value.field) == (4, "messages")
    assert "not langchain messages (they read as anthropic)" in str(info.value)


@pytest.mark.parametrize(
    ("messages", "field"),
    [
        (
            [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}],
            "messages[0].content[0].name",
        ),
        (
            [
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "name": "x", "input": [CANARY]}],
                }
            ],
            "messages[0].content[0].input",
        ),
        (
            [{"type": "function_call", "name": "x", "call_id": "c", "arguments": "[" + CANARY}],
            "messages[0].arguments",
        ),
        (
            [
                {
                    "type": "ai",
                    "data": {"content": "", "tool_calls": [{"name": "x", "args": CANARY}]},
                }
            ],
            "messages[0].data.tool_calls[0].args",
        ),
    ],
)
def test_a_malformed_message_names_its_field_never_its_value(
    messages: list[Any], field: str
) -> None:
    line = json.dumps({"case_id": "a", "output": "x", "messages": messages}).encode()
    with pytest.raises(InputError) as info:
        parse_line(line, "o.jsonl", 2)
    assert (info.value.line, info.value.field) == (2, field)
    assert CANARY not in str(info.value)


def test_outputs_format_names_a_message_format_in_the_uri() -> None:
    reference = OutputsReference.parse("s3://b/k.jsonl?format=openai-responses")
    assert (reference.location, reference.format) == ("s3://b/k.jsonl", "openai-responses")
    with pytest.raises(InputError, match="format must be one of auto, jsonl, otlp"):
        OutputsReference.parse("s3://b/k.jsonl?format=yaml")


@pytest.mark.parametrize(
    "messages",
    [
        [{"type": {"x": 1}, "role": "user", "content": "q"}],
        [{"role": "assistant", "content": [{"type": ["tool_use"], "name": "x"}]}],
        [{"type": ["ai"], "data": {}}],
        [{"lc": 1, "id": [{"x": 1}], "kwargs": {}}],
        [{"role": "assistant", "content": [{"type": {"t": 1}, "text": "x"}]}],
    ],
)
def test_unhashable_types_in_messages_are_read_or_refused_never_a_crash(
    messages: list[Any],
) -> None:
    line = json.dumps({"case_id": "a", "output": "x", "messages": messages}).encode()
    try:
        parse_line(line, "o.jsonl", 1)
    except InputError as exc:
        assert exc.line == 1


@pytest.mark.parametrize("module", ["atif", "claude_code", "codex"])
@pytest.mark.parametrize(
    "head",
    [
        b'{"type": {"x": 1}, "payload": {}, "timestamp": "2026-01-01T00:00:00Z"}\n',
        b'{"type": ["user"], "message": {"role": "user"}, "sessionId": "s", "uuid": "u"}\n',
        b'{"schema_version": ["ATIF-v1.7"], "steps": []}',
    ],
)
def test_unhashable_types_in_a_transcript_head_are_not_a_crash(module: str, head: bytes) -> None:
    import importlib

    reader = importlib.import_module(f"assay.intake.{module}")
    if reader.detect(head):
        try:
            reader.read(head, "t.jsonl")
        except InputError as exc:
            assert exc.source == "t.jsonl"
