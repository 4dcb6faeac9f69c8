"""OpenAI Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`): one file is one
case.

Codex appends one `RolloutLine` a line: `{timestamp, type, payload}` (newer versions add
`ordinal`). `session_meta` and `turn_context` describe the session and each turn;
`response_item` payloads are OpenAI Responses API items as Codex keeps them (`message`,
`reasoning`, `function_call`, `function_call_output`, `custom_tool_call`,
`custom_tool_call_output`, `local_shell_call`, `web_search_call`, …); `event_msg` payloads are
the events Codex chose to persist (`token_count`, `mcp_tool_call_end`, `patch_apply_end`,
`agent_message`, `task_started`, …). Rollouts from before the `payload` envelope (bare items,
Codex CLI before 0.3x) are not read.

Mapping (what maps to what):

- Calls: `function_call` {name, arguments (a JSON string), call_id} (with `namespace`, the
  name is `<namespace>__<name>`, the flat `mcp__<server>__<tool>` form older versions write);
  `custom_tool_call` {name, input, call_id}, whose free-form input becomes `{"input": input}`;
  `local_shell_call` {call_id, action}, tool `local_shell` with the action as arguments;
  `web_search_call` {action}, tool `web_search` with the action as arguments and no call id.
- One model response's calls are one step. Codex does not keep the response id on the items it
  records, so a response ends where the model's output does: at a `token_count` event (which
  closes each model request), a tool output item, an input message (user, developer, system) or
  the start of a turn. Reasoning and assistant messages are part of the response and end nothing.
- A call failed when its output says so or an event about it does: a `function_call_output` /
  `custom_tool_call_output` whose output is the JSON `{output, metadata: {exit_code}}` (shell
  and apply_patch) with an exit code other than 0; an `mcp_tool_call_end` with an `Err` result
  or an `Ok` result marked `isError`; a `patch_apply_end` with `success: false`; an
  `exec_command_end` with an exit code other than 0; a `web_search_call` with status `failed`.
- Turns: a `message` item is a turn (user, assistant; developer and system read as system), its
  `input_text` / `output_text` parts joined; each tool output item is a tool turn. A user
  message begins a conversation turn (`exchanges`) unless Codex injected it as context
  (`INJECTED_CONTEXT`: `<environment_context>`, `<user_instructions>`, …); its answer is its
  last assistant message with text.
- The final text is the last assistant `message` item with text (the last `agent_message`
  event's, when no assistant item has text); None when there is none.
- Usage: the last `token_count` event's `info.total_token_usage` (Codex keeps the session's
  running total): `input_tokens` (cached ones included) and `output_tokens` (reasoning
  included). Rollouts carry no cost.
- Duration: from the first to the last line `timestamp`.
- Subagent threads are rollouts of their own; this one's calls are its own.

Unseen, and why:

- `tool status`, when any call has none of the failure markers above: Codex records a plain
  function call's success nowhere in the rollout (the `success` flag it sends the model is not
  serialized, and the events of dynamic tools and of `exec_command` are not persisted), so
  "Codex rollouts mark a failed call only by an exit code or an MCP / patch end event".
- `usage`, when no `token_count` event carries usage.
- `text`, when no assistant message has text.

Errors name the line and the field within it (`payload.arguments`), never a value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, Literal

from assay.errors import InputError
from assay.intake.exchanges import TurnSplit
from assay.intake.record import AgentRecord, Evidence, Turn, UsageFigures
from assay.intake.transcript_json import (
    content_text,
    json_lines,
    leading_members,
    reject_constant,
    timestamp,
    transcript_record,
)
from assay.trajectory import ArgumentsError, ToolCall, parse_arguments

FORMAT: Final = "codex"
DESCRIBED_BY: Final = (
    "openai/codex codex-rs: protocol/src/models.rs @ 001cb8e2 (ResponseItem: message, reasoning, "
    "local_shell_call, function_call, function_call_output, custom_tool_call(_output), "
    "web_search_call), protocol/src/protocol.rs (RolloutLine {timestamp, type, payload}, "
    "RolloutItem, TokenCountEvent, McpToolCallEndEvent), rollout/src/policy.rs @ 0136a731 (the "
    "persisted event_msg types); request grouping by token_count as in harbor 0.26.0 "
    "src/harbor/agents/installed/codex.py"
)

NO_STATUS: Final = (
    "Codex rollouts mark a failed call only by an exit code or an MCP / patch end event, "
    "and some calls here have none"
)
NO_USAGE: Final = "the rollout has no token_count event with usage"
NO_TEXT: Final = "the rollout has no assistant message with text"

LINE_TYPES: Final = (
    "session_meta",
    "response_item",
    "event_msg",
    "turn_context",
    "compacted",
)
TEXT_PARTS: Final = (
    "input_text",
    "output_text",
    "text",
)
TURN_STARTS: Final = (
    "task_started",
    "turn_started",
    "task_complete",
    "turn_complete",
    "turn_aborted",
)
INJECTED_CONTEXT: Final = (
    "<environment_context>",
    "<user_instructions>",
    "<turn_aborted>",
    "<tool_context>",
    "<reasoning_context>",
    "<pinned_notes>",
    "<subagent_notification>",
)
"""How the user-role messages Codex writes itself begin (case aside): session context, not a
user's turn — codex-rs `core/src/session_prefix.rs` `is_session_prefix` ("not user intent and
must not create user-turn boundaries"), and the AGENTS.md `<user_instructions>`."""
_ROLES: Final[dict[str, Literal["system", "user", "assistant"]]] = {
    "user": "user",
    "assistant": "assistant",
    "developer": "system",
    "system": "system",
}


def detect(head: bytes) -> bool:
    """The first line is a rollout line: a `type` of the rollout's (`session_meta`,
    `response_item`, `event_msg`, `turn_context`, `compacted`) beside a `payload` (the head may
    cut a long `session_meta` payload: its members before it still show)."""
    text = head.decode("utf-8", "replace").lstrip("\ufeff").lstrip()
    members = leading_members(text.split("\n", 1)[0])
    return members.get("type") in LINE_TYPES and "payload" in members


@dataclass(frozen=True, slots=True)
class _Call:
    tool: str
    args: dict[str, Any]
    call_id: str | None
    failed: bool | None = None
    """Whether the call's own item says it failed (web_search_call status); None: it cannot."""


class _Rollout:
    """The lines of one rollout, read into a record."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.steps: list[list[_Call]] = []
        self.pending: list[_Call] = []
        self.status: dict[str, bool] = {}
        """Whether each call id failed, where a marker says."""
        self.turns: list[Turn] = []
        self.split: TurnSplit[list[_Call]] = TurnSplit()
        self.text: str | None = None
        self.agent_message: str | None = None
        self.usage = UsageFigures()
        self.moments: list[datetime] = []

    def fail(self, line: int, field: str | None, problem: str) -> InputError:
        return InputError(self.source, problem, line=line, field=field)

    def close(self) -> None:
        """The model's response is over: its calls are one step."""
        if self.pending:
            self.steps.append(self.pending)
            self.split.step(self.pending)
            self.pending = []

    def moment(self, number: int, line: dict[str, Any]) -> None:
        moment = timestamp(line.get("timestamp"), self.source, "timestamp", number)
        if moment is not None:
            self.moments.append(moment)

    def string(self, number: int, payload: dict[str, Any], key: str, what: str) -> str:
        value = payload.get(key)
        if not isinstance(value, str) or not value:
            raise self.fail(number, f"payload.{key}", f"{what} needs a {key}")
        return value

    def action(self, number: int, payload: dict[str, Any]) -> dict[str, Any]:
        action = payload.get("action", {})
        if not isinstance(action, dict):
            raise self.fail(number, "payload.action", "action must be a JSON object")
        return action

    def item(self, number: int, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        if kind == "message":
            given = payload.get("role")
            role = _ROLES.get(given) if isinstance(given, str) else None
            if role is None:
                raise self.fail(number, "payload.role", "a message needs a known role")
            content = payload.get("content")
            if content is not None and not isinstance(content, list | str):
                raise self.fail(number, "payload.content", "content must be a list of parts")
            said = content_text(content, TEXT_PARTS)
            if role == "assistant":
                if said:
                    self.text = said
                    self.split.answer(said)
            else:
                self.close()
                if role == "user" and not said.lstrip().lower().startswith(INJECTED_CONTEXT):
                    self.split.user(said)
            self.turns.append(Turn(role, said))
        elif kind == "function_call":
            name = self.string(number, payload, "name", "a function_call")
            namespace = payload.get("namespace")
            if isinstance(namespace, str) and namespace:
                name = f"{namespace}__{name}"
            arguments = payload.get("arguments", "")
            if isinstance(arguments, str):
                try:
                    arguments = parse_arguments(arguments, "payload.arguments")
                except ArgumentsError as exc:
                    raise self.fail(number, exc.field, exc.problem) from None
            elif not isinstance(arguments, dict):
                raise self.fail(number, "payload.arguments", "arguments must be a JSON string")
            call_id = self.string(number, payload, "call_id", "a function_call")
            self.pending.append(_Call(name, arguments, call_id))
        elif kind == "custom_tool_call":
            name = self.string(number, payload, "name", "a custom_tool_call")
            tool_input = payload.get("input", "")
            if not isinstance(tool_input, str):
                raise self.fail(number, "payload.input", "a custom_tool_call input is a string")
            call_id = self.string(number, payload, "call_id", "a custom_tool_call")
            self.pending.append(_Call(name, {"input": tool_input}, call_id))
        elif kind == "local_shell_call":
            shell_id = payload.get("call_id")
            shell_call = shell_id if isinstance(shell_id, str) else None
            self.pending.append(_Call("local_shell", self.action(number, payload), shell_call))
        elif kind == "web_search_call":
            status = payload.get("status")
            failed = status == "failed" if status in ("completed", "failed") else None
            self.pending.append(_Call("web_search", self.action(number, payload), None, failed))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            self.close()
            self.output(number, payload)

    def output(self, number: int, payload: dict[str, Any]) -> None:
        """A tool output: a tool turn, and the call's status where the output carries one."""
        call_id = payload.get("call_id")
        output = payload.get("output")
        said = content_text(output, TEXT_PARTS)
        if isinstance(output, str) and output[:1] in ("{", "["):
            try:
                parsed = json.loads(output, parse_constant=reject_constant)
            except (ValueError, RecursionError):
                parsed = None
            if isinstance(parsed, list):  # an MCP result's content blocks, as JSON text
                said = content_text(parsed, TEXT_PARTS) or said
            elif isinstance(parsed, dict):
                metadata = parsed.get("metadata")
                code = metadata.get("exit_code") if isinstance(metadata, dict) else None
                if type(code) is int and isinstance(call_id, str):
                    self.status[call_id] = code != 0
                if isinstance(parsed.get("output"), str):
                    said = parsed["output"]
        elif isinstance(output, dict):
            said = content_text(output.get("content"), TEXT_PARTS)
            if isinstance(output.get("success"), bool) and isinstance(call_id, str):
                self.status[call_id] = not output["success"]
        self.turns.append(Turn("tool", said))

    def event(self, number: int, payload: dict[str, Any]) -> None:
        kind = payload.get("type")
        call_id = payload.get("call_id")
        if kind == "token_count":
            self.close()
            self.tokens(number, payload.get("info"))
        elif kind in TURN_STARTS:
            self.close()
        elif kind == "agent_message" and isinstance(payload.get("message"), str):
            if payload["message"]:
                self.agent_message = payload["message"]
        elif not isinstance(call_id, str):
            return
        elif kind == "mcp_tool_call_end":
            result = payload.get("result")
            if isinstance(result, dict) and "Err" in result:
                self.status[call_id] = True
            elif isinstance(result, dict) and isinstance(result.get("Ok"), dict):
                ok = result["Ok"]
                self.status[call_id] = ok.get("isError", ok.get("is_error")) is True
        elif kind == "patch_apply_end" and isinstance(payload.get("success"), bool):
            self.status[call_id] = not payload["success"]
        elif kind == "exec_command_end" and type(payload.get("exit_code")) is int:
            self.status[call_id] = payload["exit_code"] != 0

    def tokens(self, number: int, info: Any) -> None:
        """The session's running token total, from a token_count event's `info`."""
        if not isinstance(info, dict) or info.get("total_token_usage") is None:
            return
        total = info["total_token_usage"]
        if not isinstance(total, dict):
            raise self.fail(number, "payload.info.total_token_usage", "must be a JSON object")
        figures = []
        for name in ("input_tokens", "output_tokens"):
            value = total.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                field = f"payload.info.total_token_usage.{name}"
                raise self.fail(number, field, "must be a token count")
            figures.append(value)
        self.usage = UsageFigures(figures[0], figures[1])


def read(raw: bytes, source: str) -> AgentRecord:
    """The record of one Codex rollout.

    Raises:
        InputError: not UTF-8, a line that is not a JSON object, a line without a type or
            whose payload or item is of the wrong shape — naming the line and the field, never
            a value.
    """
    rollout = _Rollout(source)
    for number, line in json_lines(raw, source):
        rollout.moment(number, line)
        kind = line.get("type")
        if not isinstance(kind, str):
            raise rollout.fail(number, "type", "a rollout line needs a type")
        payload = line.get("payload")
        if kind not in LINE_TYPES:
            continue
        if not isinstance(payload, dict):
            raise rollout.fail(number, "payload", "payload must be a JSON object")
        if kind == "response_item":
            rollout.item(number, payload)
        elif kind == "event_msg":
            rollout.event(number, payload)
        elif kind == "turn_context":
            rollout.close()
    rollout.close()
    return _record(rollout)


def _record(rollout: _Rollout) -> AgentRecord:
    def status(call: _Call) -> bool | None:
        if call.failed is None and call.call_id is not None:
            return rollout.status.get(call.call_id)
        return call.failed

    def calls(step: list[_Call]) -> tuple[ToolCall, ...]:
        return tuple(ToolCall(c.tool, c.args, c.call_id, status(c) is True) for c in step)

    steps = [calls(step) for step in rollout.steps]
    text = rollout.text if rollout.text is not None else rollout.agent_message
    unseen: dict[Evidence, str] = {}
    if any(status(call) is None for step in rollout.steps for call in step):
        unseen[Evidence.TOOL_STATUS] = NO_STATUS
    return transcript_record(
        FORMAT,
        steps,
        rollout.turns,
        text,
        rollout.usage,
        rollout.moments,
        unseen,
        rollout.split.exchanges(calls),
        no_usage=NO_USAGE,
        no_text=NO_TEXT,
    )
