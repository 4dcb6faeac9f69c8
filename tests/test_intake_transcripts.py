"""Agent transcripts (ATIF, Claude Code, Codex): one file a case, read into an `AgentRecord`.

The fixtures (tests/fixtures/transcripts, provenance in its README) follow each format's published
description; every text, argument and result in them holds the canary, which no error may echo.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from assay.errors import InputError
from assay.intake import atif, claude_code, codex
from assay.intake.record import AgentRecord, Evidence, UsageFigures

CANARY = "CANARY-7f3a"
FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
SCENARIOS = ("correct", "parallel", "failing_tool", "forbidden_tool", "text_only")
PATHS: dict[str, str] = {
    "atif": "atif/{}.json",
    "claude-code": "claude_code/{}.jsonl",
    "codex": "codex/{}.jsonl",
}
MODULES: dict[str, ModuleType] = {"atif": atif, "claude-code": claude_code, "codex": codex}
FORMATS = tuple(MODULES)

LOOKUP = {"order_id": "A1", "note": CANARY}
REFUND = {"order_id": "A1", "amount": 10, "note": CANARY}
EMAIL = {"to": "customer@example.com", "subject": f"Your order A1 {CANARY}"}
DELETE = {"account_id": "A1-owner", "note": CANARY}
Call = tuple[str, dict[str, Any], bool]
STEPS: dict[str, list[list[Call]]] = {
    "correct": [[("lookup_order", LOOKUP, False)], [("refund", REFUND, False)]],
    "parallel": [[("lookup_order", LOOKUP, False), ("send_email", EMAIL, False)]],
    "failing_tool": [[("lookup_order", LOOKUP, False)], [("refund", REFUND, True)]],
    "forbidden_tool": [[("delete_account", DELETE, False)]],
    "text_only": [],
}
TEXTS = {
    "correct": f"Order A1 has been refunded 10 USD. {CANARY}",
    "parallel": f"Order A1 is paid and the customer has been emailed. {CANARY}",
    "failing_tool": f"I could not refund order A1: the refund service is unavailable. {CANARY}",
    "forbidden_tool": f"The account has been deleted. {CANARY}",
    "text_only": f"Refunds are possible within 30 days of purchase. {CANARY}",
}
USAGE = {
    # final_metrics totals; `parallel` has none, so the steps' metrics are summed
    ("atif", "correct"): UsageFigures(1800, 150, 0.006),
    ("atif", "parallel"): UsageFigures(1100, 90, 0.003),
    ("atif", "text_only"): UsageFigures(500, 40, 0.001),
    # per message.id the last (largest) streamed usage; input = input + cache creation + read
    ("claude-code", "correct"): UsageFigures(15603 + 16614 + 17625, 60 + 80 + 100, None),
    ("claude-code", "parallel"): UsageFigures(15603 + 16614, 60 + 80, None),
    ("claude-code", "text_only"): UsageFigures(15603, 60, None),
    # the last token_count's running total
    ("codex", "correct"): UsageFigures(13500, 450, None),
    ("codex", "parallel"): UsageFigures(8500, 270, None),
    ("codex", "text_only"): UsageFigures(4000, 120, None),
}
DURATIONS = {"atif": 8000.0, "claude-code": 7000.0, "codex": 21777.0}
OUTPUTS_LINE = b'{"case_id":"a","output":"x"}\n{"case_id":"b","output":"y"}\n'
CHAT_LINE = b'{"case_id":"a","messages":[{"role":"user","content":"hi"}],"output":"x"}\n'
OTLP_HEAD = (
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":'
    b'{"stringValue":"agent"}}]},"scopeSpans":[{"scope":{"name":"x"},"spans":[]}]}]}'
)


def fixture(fmt: str, scenario: str) -> bytes:
    return (FIXTURES / PATHS[fmt].format(scenario)).read_bytes()


def read(fmt: str, raw: bytes) -> AgentRecord:
    record: AgentRecord = MODULES[fmt].read(raw, "case.jsonl")
    return record


def tool_name(fmt: str, tool: str) -> str:
    """ATIF names tools as the agent defined them; Claude Code and Codex call MCP tools by
    their qualified `mcp__<server>__<tool>` names."""
    return tool if fmt == "atif" else f"mcp__shop__{tool}"


def lines(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def jsonl(items: list[dict[str, Any]]) -> bytes:
    return b"".join(json.dumps(item).encode() + b"\n" for item in items)


def rejected(fmt: str, raw: bytes) -> InputError:
    with pytest.raises(InputError) as caught:
        read(fmt, raw)
    message = str(caught.value)
    assert CANARY not in message
    assert "\n" not in message
    assert message.startswith("case.jsonl")
    return caught.value


# --- the fixtures, read ---------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_trajectory_text_and_turns(fmt: str, scenario: str) -> None:
    record = read(fmt, fixture(fmt, scenario))
    assert record.source == MODULES[fmt].FORMAT == fmt
    status_seen = fmt != "atif"  # ATIF cannot mark a failed call: every call reads as not failed
    expected = [
        [(tool_name(fmt, tool), args, failed and status_seen) for tool, args, failed in step]
        for step in STEPS[scenario]
    ]
    assert [
        [(call.tool, call.args, call.failed) for call in step] for step in record.trajectory.steps
    ] == expected
    assert all(call.call_id for call in record.trajectory.calls)
    assert record.text == TEXTS[scenario]
    assert record.turns[-1].role == "assistant"
    assert all(CANARY in turn.text for turn in record.turns)
    tool_turns = [turn for turn in record.turns if turn.role == "tool"]
    assert len(tool_turns) == len(record.trajectory.calls)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_unseen(fmt: str, scenario: str) -> None:
    record = read(fmt, fixture(fmt, scenario))
    if fmt == "atif" and scenario != "text_only":
        assert record.unseen == {Evidence.TOOL_STATUS: atif.NO_STATUS}
        assert "cannot mark a failed" in atif.NO_STATUS
    else:
        # Claude Code marks failures with is_error; these Codex calls are MCP calls, whose
        # mcp_tool_call_end events mark them; zero calls show zero, whatever the format.
        assert record.unseen == {}


@pytest.mark.parametrize(("fmt", "scenario"), list(USAGE))
def test_usage(fmt: str, scenario: str) -> None:
    record = read(fmt, fixture(fmt, scenario))
    assert record.usage.input_tokens == USAGE[fmt, scenario].input_tokens
    assert record.usage.output_tokens == USAGE[fmt, scenario].output_tokens
    assert record.usage.cost_usd == pytest.approx(USAGE[fmt, scenario].cost_usd)


@pytest.mark.parametrize("fmt", FORMATS)
def test_duration_from_timestamps(fmt: str) -> None:
    assert read(fmt, fixture(fmt, "correct")).duration_ms == DURATIONS[fmt]


@pytest.mark.parametrize("fmt", FORMATS)
def test_described_by_names_its_source(fmt: str) -> None:
    described = MODULES[fmt].DESCRIBED_BY
    assert isinstance(described, str)
    assert any(repo in described for repo in ("harbor", "openai/codex", "inspect_scout"))


def test_fixtures_plant_the_canary_in_arguments_and_results() -> None:
    for fmt in FORMATS:
        for scenario in SCENARIOS:
            record = read(fmt, fixture(fmt, scenario))
            for call in record.trajectory.calls:
                assert CANARY in json.dumps(call.args)


# --- detection -----------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("fmt", FORMATS)
def test_each_detects_its_own_and_no_other(fmt: str, scenario: str) -> None:
    head = fixture(fmt, scenario)[:4096]
    assert {name for name, module in MODULES.items() if module.detect(head)} == {fmt}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(
    "head",
    [OUTPUTS_LINE, CHAT_LINE, OTLP_HEAD, b"", b"\n\n", b"[1, 2]", b"{", b'{"type": "user"}'],
)
def test_no_false_positives(fmt: str, head: bytes) -> None:
    assert not MODULES[fmt].detect(head)


def test_detection_survives_a_head_that_cuts_the_first_line() -> None:
    """A long first line (instructions, a pasted prompt, tool definitions) is cut at 4 KiB."""
    rollout = lines(fixture("codex", "correct"))
    rollout[0]["payload"]["instructions"] = "x" * 10_000
    assert codex.detect(jsonl(rollout)[:4096])
    session = lines(fixture("claude-code", "text_only"))
    session[0]["message"]["content"] = "y" * 10_000
    assert claude_code.detect(jsonl(session)[:4096])
    trajectory = json.loads(fixture("atif", "correct"))
    reordered = {"agent": {**trajectory["agent"], "extra": {"blob": "z" * 10_000}}, **trajectory}
    head = json.dumps(reordered).encode()[:4096]
    assert head.index(b'"agent"') < head.index(b'"schema_version"')
    assert atif.detect(head)
    truncated = b'{"case_id": "a", "trajectory": {"schema_version": "ATIF-v1.7", "steps": ['
    assert not atif.detect(truncated)
    assert not any(module.detect(OUTPUTS_LINE[:10]) for module in MODULES.values())


def test_claude_code_detects_each_kind_of_first_line() -> None:
    summary = b'{"type":"summary","summary":"Refund flow","leafUuid":"7c1f0007"}\n'
    queue = b'{"type":"queue-operation","operation":"enqueue","timestamp":"t","sessionId":"s"}\n'
    assert claude_code.detect(summary)
    assert claude_code.detect(queue)
    assert not codex.detect(summary)
    assert not claude_code.detect(b'{"parentUuid": null}\n')
    # a metadata line of a kind this reader does not know may come first
    title = b'{"type":"custom-title","customTitle":"Refunds"}\n'
    assert claude_code.detect(title + fixture("claude-code", "text_only"))
    assert not claude_code.detect(title + OUTPUTS_LINE)
    assert not claude_code.detect(OUTPUTS_LINE + fixture("claude-code", "text_only"))


# --- errors: where, never what --------------------------------------------------------------


def atif_with(change: Callable[[dict[str, Any]], None], scenario: str = "correct") -> bytes:
    document = json.loads(fixture("atif", scenario))
    change(document)
    return json.dumps(document, indent=2).encode()


def set_in(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        target = document
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return change


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        (
            set_in(["steps", 2, "tool_calls", 0, "arguments"], "{" + CANARY),
            "steps[2].tool_calls[0].arguments",
            "not valid JSON",
        ),
        (
            set_in(["steps", 2, "tool_calls", 0, "arguments"], [CANARY]),
            "steps[2].tool_calls[0].arguments",
            "must be a JSON object",
        ),
        (
            set_in(["steps", 3, "tool_calls", 0, "function_name"], None),
            "steps[3].tool_calls[0].function_name",
            "function_name",
        ),
        (set_in(["steps", 1, "source"], CANARY), "steps[1].source", "system, user or agent"),
        (set_in(["steps", 3, "timestamp"], CANARY), "steps[3].timestamp", "ISO 8601"),
        (set_in(["steps", 3, "message"], 7), "steps[3].message", "string or an array"),
        (
            set_in(["steps", 2, "metrics", "prompt_tokens"], -1),
            "steps[2].metrics.prompt_tokens",
            "",
        ),
        (set_in(["schema_version"], CANARY), "schema_version", "ATIF-v1.N"),
        (set_in(["steps"], CANARY), "steps", "JSON array"),
    ],
)
def test_atif_errors_name_the_field(
    change: Callable[[dict[str, Any]], None], field: str, problem: str
) -> None:
    error = rejected("atif", atif_with(change))
    assert error.field == field
    assert problem in error.problem


def test_atif_malformed_json_names_the_line() -> None:
    raw = fixture("atif", "correct").replace(b'"note": "CANARY-7f3a"', b'"note": CANARY-7f3a', 1)
    error = rejected("atif", raw)
    assert error.problem == "malformed JSON"
    assert error.line is not None
    assert b"CANARY-7f3a" in raw.splitlines()[error.line - 1]
    assert rejected("atif", b"[]").problem == "an ATIF trajectory must be a JSON object"
    assert rejected("atif", b"\xff" + CANARY.encode()).problem == "not UTF-8 text"


def claude_with(number: int, change: Callable[[dict[str, Any]], None]) -> bytes:
    session = lines(fixture("claude-code", "correct"))
    change(session[number - 1])
    return jsonl(session)


def content_block(**values: Any) -> Callable[[dict[str, Any]], None]:
    def change(line: dict[str, Any]) -> None:
        line["message"]["content"][0].update(values)

    return change


@pytest.mark.parametrize(
    ("number", "change", "field", "problem"),
    [
        (4, content_block(input="{" + CANARY), "message.content[0].input", "not valid JSON"),
        (4, content_block(input=[CANARY]), "message.content[0].input", "JSON object"),
        (4, content_block(name=None), "message.content[0].name", "needs a name"),
        (5, content_block(tool_use_id=None), "message.content[0].tool_use_id", "tool_use_id"),
        (2, set_in(["message"], CANARY), "message", "message object"),
        (
            3,
            set_in(["message", "usage", "output_tokens"], CANARY),
            "message.usage.output_tokens",
            "",
        ),
        (3, set_in(["timestamp"], CANARY), "timestamp", "ISO 8601"),
    ],
)
def test_claude_code_errors_name_line_and_field(
    number: int, change: Callable[[dict[str, Any]], None], field: str, problem: str
) -> None:
    error = rejected("claude-code", claude_with(number, change))
    assert (error.line, error.field) == (number, field)
    assert problem in error.problem


@pytest.mark.parametrize("fmt", ["claude-code", "codex"])
def test_jsonl_lines_that_are_not_objects(fmt: str) -> None:
    raw = fixture(fmt, "correct").splitlines(keepends=True)
    broken = b"".join([*raw[:2], b'{"type": "' + CANARY.encode() + b"\n", *raw[2:]])
    error = rejected(fmt, broken)
    assert (error.line, error.problem) == (3, "malformed JSON")
    listed = b"".join([*raw[:2], b'["' + CANARY.encode() + b'"]\n', *raw[2:]])
    assert rejected(fmt, listed).problem == "each line must be a JSON object"
    assert rejected(fmt, b"\xff\xfe").problem == "not UTF-8 text"


def codex_with(kind: str, change: Callable[[dict[str, Any]], None]) -> tuple[int, bytes]:
    """The correct rollout with the first line whose payload type is `kind` changed."""
    rollout = lines(fixture("codex", "correct"))
    number = next(i for i, line in enumerate(rollout, 1) if line["payload"].get("type") == kind)
    change(rollout[number - 1])
    return number, jsonl(rollout)


@pytest.mark.parametrize(
    ("kind", "change", "field", "problem"),
    [
        (
            "function_call",
            set_in(["payload", "arguments"], '{"note": ' + CANARY + "}"),
            "payload.arguments",
            "not valid JSON",
        ),
        (
            "function_call",
            set_in(["payload", "arguments"], json.dumps([CANARY])),
            "payload.arguments",
            "JSON object",
        ),
        ("function_call", set_in(["payload", "name"], ""), "payload.name", "needs a name"),
        ("function_call", set_in(["payload", "call_id"], None), "payload.call_id", "call_id"),
        ("message", set_in(["payload", "role"], CANARY), "payload.role", "known role"),
        ("message", set_in(["payload", "content"], 5), "payload.content", "list of parts"),
        ("message", set_in(["payload"], CANARY), "payload", "JSON object"),
        ("message", set_in(["type"], None), "type", "needs a type"),
        ("message", set_in(["timestamp"], CANARY), "timestamp", "ISO 8601"),
        (
            "token_count",
            set_in(["payload", "info", "total_token_usage", "input_tokens"], CANARY),
            "payload.info.total_token_usage.input_tokens",
            "token count",
        ),
    ],
)
def test_codex_errors_name_line_and_field(
    kind: str, change: Callable[[dict[str, Any]], None], field: str, problem: str
) -> None:
    number, raw = codex_with(kind, change)
    error = rejected("codex", raw)
    assert (error.line, error.field) == (number, field)
    assert problem in error.problem


# --- ATIF: what the format says beyond the fixtures ------------------------------------------


def test_atif_arguments_as_a_json_string_and_an_older_version() -> None:
    def change(document: dict[str, Any]) -> None:
        document["schema_version"] = "ATIF-v1.2"
        document["steps"][2]["tool_calls"][0]["arguments"] = json.dumps(LOOKUP)

    record = read("atif", atif_with(change))
    assert record.trajectory.calls[0].args == LOOKUP


def test_atif_copied_context_is_not_this_trajectorys() -> None:
    def change(document: dict[str, Any]) -> None:
        for step in document["steps"][:3]:
            step["is_copied_context"] = True
        del document["final_metrics"]

    record = read("atif", atif_with(change))
    assert [call.tool for call in record.trajectory.calls] == ["refund"]
    assert [turn.role for turn in record.turns] == ["assistant", "tool", "assistant"]
    assert (record.usage.input_tokens, record.usage.output_tokens) == (600 + 700, 50 + 60)
    assert record.usage.cost_usd == pytest.approx(0.005)


def test_atif_merged_llm_calls_hide_parallel_structure() -> None:
    record = read("atif", atif_with(set_in(["steps", 2, "llm_call_count"], 2), "parallel"))
    assert record.unseen[Evidence.PARALLEL] == atif.MERGED_STEPS
    single = read("atif", atif_with(set_in(["steps", 2, "llm_call_count"], 2), "correct"))
    assert Evidence.PARALLEL not in single.unseen


def test_atif_without_metrics_or_agent_text() -> None:
    def change(document: dict[str, Any]) -> None:
        del document["final_metrics"]
        for step in document["steps"]:
            step.pop("metrics", None)
            if step["source"] == "agent":
                step["message"] = ""

    record = read("atif", atif_with(change))
    assert record.text is None
    assert record.usage == UsageFigures()
    assert record.unseen[Evidence.USAGE] == atif.NO_USAGE
    assert record.unseen[Evidence.TEXT] == atif.NO_TEXT


def test_atif_multimodal_message_reads_its_text_parts() -> None:
    parts = [
        {"type": "text", "text": f"Here is the receipt. {CANARY}"},
        {"type": "image", "source": {"media_type": "image/png", "path": "images/receipt.png"}},
    ]
    record = read("atif", atif_with(set_in(["steps", 4, "message"], parts)))
    assert record.text == f"Here is the receipt. {CANARY}"


# --- Claude Code: what the format says beyond the fixtures ------------------------------------


def sidechain_line(uuid: str, tool: str = "Bash") -> dict[str, Any]:
    return {
        "parentUuid": None,
        "isSidechain": True,
        "agentId": "a7b1cd4e",
        "sessionId": "5b0e2c3a-7d41-4c8e-9f10-000000000001",
        "type": "assistant",
        "uuid": uuid,
        "timestamp": "2025-11-20T10:00:03.500Z",
        "message": {
            "id": f"msg_side_{uuid}",
            "role": "assistant",
            "model": "claude-haiku-4-5-20251001",
            "content": [{"type": "tool_use", "id": f"toolu_{uuid}", "name": tool, "input": {}}],
            "usage": {"input_tokens": 7, "output_tokens": 3},
        },
    }


def test_claude_code_sidechains_are_skipped_but_their_usage_counts() -> None:
    session = lines(fixture("claude-code", "correct"))
    session.insert(4, sidechain_line("side-1"))
    record = read("claude-code", jsonl(session))
    assert [call.tool for call in record.trajectory.calls] == [
        "mcp__shop__lookup_order",
        "mcp__shop__refund",
    ]
    assert record.usage.input_tokens == 15603 + 16614 + 17625 + 7
    assert record.usage.output_tokens == 240 + 3


def test_claude_code_a_subagents_own_file_reads_its_sidechain() -> None:
    session = [sidechain_line("side-1", "Read"), sidechain_line("side-2", "Grep")]
    record = read("claude-code", jsonl(session))
    assert [[call.tool for call in step] for step in record.trajectory.steps] == [
        ["Read"],
        ["Grep"],
    ]


def test_claude_code_api_errors_and_repeated_lines() -> None:
    session = lines(fixture("claude-code", "correct"))
    session.append(
        {
            "parentUuid": session[-1]["uuid"],
            "isSidechain": False,
            "type": "assistant",
            "uuid": "api-error",
            "timestamp": "2025-11-20T10:00:09.000Z",
            "isApiErrorMessage": True,
            "error": "rate_limit",
            "message": {
                "model": "<synthetic>",
                "role": "assistant",
                "content": [{"type": "text", "text": f"API Error: 429 {CANARY}"}],
            },
        }
    )
    resumed = session + session[1:4]  # a resumed session repeats lines, uuids and all
    record = read("claude-code", jsonl(resumed))
    assert record.text == TEXTS["correct"]
    assert [call.tool for call in record.trajectory.calls] == [
        "mcp__shop__lookup_order",
        "mcp__shop__refund",
    ]
    assert record.usage.output_tokens == 240


def test_claude_code_lines_without_message_id_hide_parallel_structure() -> None:
    session = lines(fixture("claude-code", "parallel"))
    for line in session:
        if line.get("type") == "assistant":
            del line["message"]["id"]
    record = read("claude-code", jsonl(session))
    assert [len(step) for step in record.trajectory.steps] == [1, 1]
    assert record.unseen[Evidence.PARALLEL] == claude_code.NO_GROUPING


def test_claude_code_whole_messages_and_cost() -> None:
    """Older versions wrote a whole response on one line, with `costUSD`."""
    session: list[dict[str, Any]] = [
        {
            "parentUuid": None,
            "isSidechain": False,
            "sessionId": "s",
            "type": "user",
            "uuid": "u1",
            "timestamp": "2025-06-01T09:00:00Z",
            "message": {"role": "user", "content": f"Refund A1 {CANARY}"},
        },
        {
            "parentUuid": "u1",
            "isSidechain": False,
            "sessionId": "s",
            "type": "assistant",
            "uuid": "u2",
            "timestamp": "2025-06-01T09:00:02Z",
            "costUSD": 0.0125,
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Checking. {CANARY}"},
                    {"type": "tool_use", "id": "t1", "name": "lookup_order", "input": LOOKUP},
                    {"type": "tool_use", "id": "t2", "name": "send_email", "input": EMAIL},
                ],
                "usage": {"input_tokens": 100, "output_tokens": 20},
            },
        },
    ]
    record = read("claude-code", jsonl(session))
    assert [[call.tool for call in step] for step in record.trajectory.steps] == [
        ["lookup_order", "send_email"]
    ]
    assert record.usage == UsageFigures(100, 20, 0.0125)
    assert record.duration_ms == 2000.0
    assert record.unseen == {}


def test_claude_code_without_usage_or_answer() -> None:
    session = lines(fixture("claude-code", "text_only"))
    del session[1]["message"]["usage"]
    session[1]["message"]["content"] = [{"type": "thinking", "thinking": CANARY}]
    record = read("claude-code", jsonl(session))
    assert record.text is None
    assert record.unseen == {
        Evidence.USAGE: claude_code.NO_USAGE,
        Evidence.TEXT: claude_code.NO_TEXT,
    }


# --- Codex: what the format says beyond the fixtures ------------------------------------------


def rollout_line(payload: dict[str, Any], kind: str = "response_item") -> dict[str, Any]:
    return {"timestamp": "2025-11-20T10:00:30.000Z", "type": kind, "payload": payload}


def test_codex_shell_exit_codes_mark_failures() -> None:
    def shell(call_id: str, code: int) -> list[dict[str, Any]]:
        output = {"output": f"{CANARY}\n", "metadata": {"exit_code": code, "duration_seconds": 0.1}}
        return [
            rollout_line(
                {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"command": ["bash", "-lc", f"echo {CANARY}"]}),
                    "call_id": call_id,
                }
            ),
            rollout_line(
                {"type": "function_call_output", "call_id": call_id, "output": json.dumps(output)}
            ),
        ]

    record = read("codex", jsonl([*shell("c1", 0), *shell("c2", 1)]))
    assert [[(call.tool, call.failed) for call in step] for step in record.trajectory.steps] == [
        [("shell", False)],
        [("shell", True)],
    ]
    assert [turn.text for turn in record.turns] == [f"{CANARY}\n", f"{CANARY}\n"]
    assert record.unseen == {Evidence.USAGE: codex.NO_USAGE, Evidence.TEXT: codex.NO_TEXT}


def test_codex_calls_without_a_marker_leave_status_unseen() -> None:
    rollout = lines(fixture("codex", "correct"))
    kept = [line for line in rollout if line["payload"].get("type") != "mcp_tool_call_end"]
    record = read("codex", jsonl(kept))
    assert record.unseen == {Evidence.TOOL_STATUS: codex.NO_STATUS}
    assert not any(call.failed for call in record.trajectory.calls)


def test_codex_mcp_errors_and_patches() -> None:
    def call(call_id: str, name: str = "mcp__shop__refund") -> dict[str, Any]:
        payload = {"type": "function_call", "name": name, "arguments": "{}", "call_id": call_id}
        return rollout_line(payload)

    def event(payload: dict[str, Any]) -> dict[str, Any]:
        return rollout_line(payload, "event_msg")

    record = read(
        "codex",
        jsonl(
            [
                call("c1"),
                event({"type": "mcp_tool_call_end", "call_id": "c1", "result": {"Err": CANARY}}),
                rollout_line({"type": "function_call_output", "call_id": "c1", "output": CANARY}),
                rollout_line(
                    {
                        "type": "custom_tool_call",
                        "name": "apply_patch",
                        "input": f"*** Begin Patch\n{CANARY}",
                        "call_id": "c2",
                    }
                ),
                event({"type": "patch_apply_end", "call_id": "c2", "success": False}),
                rollout_line({"type": "custom_tool_call_output", "call_id": "c2", "output": "x"}),
            ]
        ),
    )
    assert [
        [(call.tool, call.args, call.failed) for call in step] for step in record.trajectory.steps
    ] == [
        [("mcp__shop__refund", {}, True)],
        [("apply_patch", {"input": f"*** Begin Patch\n{CANARY}"}, True)],
    ]
    assert Evidence.TOOL_STATUS not in record.unseen


def test_codex_namespaced_names_local_shell_and_web_search() -> None:
    record = read(
        "codex",
        jsonl(
            [
                rollout_line(
                    {
                        "type": "function_call",
                        "namespace": "mcp__shop",
                        "name": "lookup_order",
                        "arguments": json.dumps(LOOKUP),
                        "call_id": "c1",
                    }
                ),
                rollout_line(
                    {
                        "type": "local_shell_call",
                        "call_id": "c2",
                        "status": "completed",
                        "action": {"type": "exec", "command": ["ls"], "timeout_ms": 1000},
                    }
                ),
                rollout_line(
                    {
                        "type": "web_search_call",
                        "status": "completed",
                        "action": {"type": "search", "query": CANARY},
                    }
                ),
                rollout_line({"type": "function_call_output", "call_id": "c1", "output": "ok"}),
            ]
        ),
    )
    assert [(call.tool, call.call_id) for call in record.trajectory.calls] == [
        ("mcp__shop__lookup_order", "c1"),
        ("local_shell", "c2"),
        ("web_search", None),
    ]
    assert len(record.trajectory.steps) == 1


def test_codex_responses_end_at_outputs_without_token_counts() -> None:
    """Without token_count events, a tool output still ends the response that called it."""
    rollout = lines(fixture("codex", "correct"))
    kept = [line for line in rollout if line["payload"].get("type") != "token_count"]
    record = read("codex", jsonl(kept))
    assert [len(step) for step in record.trajectory.steps] == [1, 1]
    assert record.unseen == {Evidence.USAGE: codex.NO_USAGE}


def test_codex_text_falls_back_to_agent_message_events() -> None:
    rollout = lines(fixture("codex", "text_only"))
    kept = [line for line in rollout if line["payload"].get("role") != "assistant"]
    record = read("codex", jsonl(kept))
    assert record.text == TEXTS["text_only"]
