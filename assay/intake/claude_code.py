"""Claude Code session transcripts (`~/.claude/projects/<project>/<session>.jsonl`): one file is
one case.

Claude Code appends one JSON object a line: `user` and `assistant` lines carry `message` (an
Anthropic Messages API message) beside `uuid`, `parentUuid`, `isSidechain`, `sessionId`,
`timestamp`, …; other lines (`summary`, `system`, `file-history-snapshot`, `queue-operation`,
`attachment`, …) carry no conversation and are skipped. Claude Code writes an assistant response
as several lines, one content block each, that share `message.id` (and `requestId`) and repeat
the response's `usage` as it streamed.

Mapping (what maps to what):

- One model response is the assistant lines sharing a `message.id`, their content blocks in
  file order. Its `tool_use` (and `server_tool_use`) blocks {id, name, input} are one trajectory
  step; `input` is the arguments object (a JSON string is parsed too), `id` the call id.
- A call failed when a `tool_result` block {tool_use_id, is_error} answering its id says
  `is_error: true`; absent means it did not fail (the Messages API's own default), so tool
  status is always seen.
- Turns: a user line's string content or `text` blocks is a user turn (lines marked `isMeta`,
  Claude Code's own notes, are not), each `tool_result` block a tool turn (its content's text),
  each model response an assistant turn (its `text` blocks joined).
- The final text is the text of the last model response that has text; None when none has.
- Usage: per `message.id` the largest figures its lines report (streamed lines repeat and grow
  them), summed over the responses: input is `input_tokens + cache_creation_input_tokens +
  cache_read_input_tokens` (every prompt token, cached or not), output `output_tokens`. Cost is
  the sum of the lines' `costUSD` when every response has one (older Claude Code versions wrote
  it; current ones do not). Usage counts every response in the file, subagent lines included.
- Duration: from the first to the last line `timestamp`.
- Subagents (`isSidechain: true` lines, written inline by older versions): not this
  trajectory's calls — the main agent's `Task` / `Agent` call is. They are skipped, unless the
  file has no other conversation lines (a subagent's own `agent-*.jsonl`), which then reads as
  the subagent's session.
- Assistant lines Claude Code made up itself (`isApiErrorMessage: true`, model `<synthetic>`:
  an API error shown to the user) are not model responses: no call, no text, no usage.
- A line repeating an earlier line's `uuid` (a resumed session copies its history) is read once.
  Forks (a rewound prompt) are read in file order: the reader does not prune abandoned branches.

Unseen, and why:

- `parallel structure`, only when an assistant line with a tool call has no `message.id`:
  without it, which calls one response made cannot be told.
- `usage`, when no response carries `usage`.
- `text`, when no response has text.

Errors name the line and the field within it (`message.content[1].input`), never a value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from assay.errors import InputError
from assay.intake.exchanges import TurnSplit
from assay.intake.record import AgentRecord, Evidence, Turn, UsageFigures
from assay.intake.transcript_json import (
    content_text,
    json_lines,
    leading_members,
    timestamp,
    transcript_record,
)
from assay.trajectory import ArgumentsError, ToolCall, parse_arguments

FORMAT: Final = "claude-code"
DESCRIBED_BY: Final = (
    "Claude Code has no published schema for its session JSONL; this follows the pydantic models "
    "of meridianlabs-ai/inspect_scout src/inspect_scout/sources/_claude_code/models.py @ "
    "8678e6f0 (events user/assistant/system, uuid/parentUuid/isSidechain, assistant fragments "
    "merged by message.id, tool_result is_error) and real Claude Code 2.1.x lines quoted in public "
    "repositories (one content block a line, shared message.id/requestId, streamed usage, "
    "isApiErrorMessage); message content is the Anthropic Messages API's"
)

NO_GROUPING: Final = (
    "Claude Code assistant lines without message.id cannot show which calls one response made"
)
NO_USAGE: Final = "the session's assistant messages carry no usage"
NO_TEXT: Final = "the session has no assistant message with text"

CALL_BLOCKS: Final = (
    "tool_use",
    "server_tool_use",
)
USAGE_FIELDS: Final = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)

LEADING_LINES: Final = 5
"""How many lines of the head detection looks at for a conversation line."""
FOREIGN: Final = frozenset({"payload", "case_id", "resourceSpans", "schema_version", "messages"})
"""Top-level keys of other formats' lines (Codex, outputs, OTLP, ATIF): such a line first is no
session."""


def _claude_line(members: dict[str, Any]) -> bool:
    """A Claude Code line, by its top-level members."""
    kind = members.get("type")
    if "parentUuid" in members:
        return not members.keys().isdisjoint({"isSidechain", "sessionId", "uuid"})
    return (
        ("sessionId" in members and "uuid" in members)
        or (kind == "summary" and "leafUuid" in members)
        or (kind == "file-history-snapshot" and "messageId" in members)
        or (kind == "queue-operation" and "sessionId" in members)
    )


def detect(head: bytes) -> bool:
    """A Claude Code line within the first few lines: a conversation line (`parentUuid`
    beside `isSidechain`, `sessionId` or `uuid`; or `sessionId` beside `uuid`), a `summary`
    with `leafUuid`, a `file-history-snapshot` with `messageId`, a `queue-operation` with
    `sessionId`. Lines before it may only be typed objects of other kinds (metadata lines a
    newer Claude Code writes first); any other line first means it is not a session.

    Conversation lines put `parentUuid` first, so a line longer than the head still shows it.
    """
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    lines = [line for line in text.split("\n") if line.strip()]
    for line in lines[:LEADING_LINES]:
        members = leading_members(line)
        if _claude_line(members):
            return True
        if not isinstance(members.get("type"), str) or not members.keys().isdisjoint(FOREIGN):
            return False
    return False


@dataclass
class _Response:
    """One model response: the content blocks of the lines sharing its `message.id`."""

    blocks: list[tuple[int, int, Any]] = field(default_factory=list)
    """(line number, index in that line's content, block)."""
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    has_usage: bool = False


class _Session:
    """The lines of one session file, read into a record."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.responses: dict[str, _Response] = {}
        self.turns: list[Turn | str] = []
        """Turns, with a model response's key where its assistant turn goes."""
        self.failed: set[str] = set()
        self.side: dict[str, _Response] = {}
        """Subagent responses, counted for usage only."""
        self.moments: list[datetime] = []
        self.ungrouped = False

    def fail(self, line: int, field: str | None, problem: str) -> InputError:
        return InputError(self.source, problem, line=line, field=field)

    def message(self, number: int, line: dict[str, Any]) -> dict[str, Any]:
        message = line.get("message")
        if not isinstance(message, dict):
            raise self.fail(number, "message", "a user or assistant line needs a message object")
        content = message.get("content")
        if content is not None and not isinstance(content, str | list):
            raise self.fail(number, "message.content", "content must be a string or a list")
        return message

    def moment(self, number: int, line: dict[str, Any]) -> None:
        moment = timestamp(line.get("timestamp"), self.source, "timestamp", number)
        if moment is not None:
            self.moments.append(moment)

    def response(
        self, number: int, line: dict[str, Any], message: dict[str, Any], *, main: bool = True
    ) -> _Response:
        """The response this assistant line is part of (a line without `message.id` is one on
        its own), counting its usage; a subagent's (`main` false) counts only for usage."""
        message_id = message.get("id")
        key = message_id if isinstance(message_id, str) and message_id else f"line {number}"
        responses = self.responses if main else self.side
        response = responses.get(key)
        if response is None:
            response = responses[key] = _Response()
            if main:
                self.turns.append(key)
        usage = message.get("usage")
        if usage is not None:
            if not isinstance(usage, dict):
                raise self.fail(number, "message.usage", "usage must be a JSON object")
            response.has_usage = True
            for name in USAGE_FIELDS:
                value = usage.get(name, 0)
                if value is None:
                    continue
                if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                    raise self.fail(number, f"message.usage.{name}", "must be a token count")
                response.usage[name] = max(response.usage.get(name, 0), value)
        cost = line.get("costUSD")
        if cost is not None:
            if isinstance(cost, bool) or not isinstance(cost, int | float) or cost < 0:
                raise self.fail(number, "costUSD", "must be a cost in USD, 0 or more")
            response.cost = max(response.cost or 0.0, float(cost))
        return response

    def user(self, number: int, line: dict[str, Any], message: dict[str, Any]) -> None:
        content = message.get("content")
        if isinstance(content, str):
            if line.get("isMeta") is not True:
                self.turns.append(Turn("user", content))
            return
        texts = []
        for j, block in enumerate(content or []):
            if not isinstance(block, dict):
                raise self.fail(number, f"message.content[{j}]", "a block must be a JSON object")
            if block.get("type") == "tool_result":
                call_id = block.get("tool_use_id")
                if not isinstance(call_id, str):
                    field = f"message.content[{j}].tool_use_id"
                    raise self.fail(number, field, "a tool_result needs a tool_use_id")
                if block.get("is_error") is True:
                    self.failed.add(call_id)
                self.turns.append(Turn("tool", content_text(block.get("content"))))
            elif block.get("type") == "text" and isinstance(block.get("text"), str):
                texts.append(block["text"])
        if texts and line.get("isMeta") is not True:
            self.turns.append(Turn("user", "".join(texts)))

    def calls(self, response: _Response) -> list[ToolCall]:
        """The response's calls, each once (a block repeated under its id is one call)."""
        calls = []
        ids: set[str] = set()
        for number, j, block in response.blocks:
            if not isinstance(block, dict) or block.get("type") not in CALL_BLOCKS:
                continue
            if isinstance(block.get("id"), str):
                if block["id"] in ids:
                    continue
                ids.add(block["id"])
            where = f"message.content[{j}]"
            name, call_id, args = block.get("name"), block.get("id"), block.get("input", {})
            if not isinstance(name, str) or not name:
                raise self.fail(number, f"{where}.name", "a tool_use block needs a name")
            if isinstance(args, str):
                try:
                    args = parse_arguments(args, f"{where}.input")
                except ArgumentsError as exc:
                    raise self.fail(number, exc.field, exc.problem) from None
            elif not isinstance(args, dict):
                raise self.fail(number, f"{where}.input", "tool_use input must be a JSON object")
            call = call_id if isinstance(call_id, str) else None
            calls.append(ToolCall(name, args, call, call is not None and call in self.failed))
        return calls


def _synthetic(line: dict[str, Any], message: dict[str, Any]) -> bool:
    return line.get("isApiErrorMessage") is True or message.get("model") == "<synthetic>"


def read(raw: bytes, source: str) -> AgentRecord:
    """The record of one Claude Code session file.

    Raises:
        InputError: not UTF-8, a line that is not a JSON object, or a user / assistant line of
            the wrong shape — naming the line and the field, never a value.
    """
    lines = json_lines(raw, source)
    session = _Session(source)
    seen: set[str] = set()
    conversation = []
    for number, line in lines:
        uuid = line.get("uuid")
        if isinstance(uuid, str):
            if uuid in seen:
                continue
            seen.add(uuid)
        session.moment(number, line)
        if line.get("type") in ("user", "assistant"):
            conversation.append((number, line))
    main = [entry for entry in conversation if entry[1].get("isSidechain") is not True]
    chain = main or conversation
    read_in_chain = {number for number, _ in chain}
    for number, line in conversation:
        message = session.message(number, line)
        sidechain = number not in read_in_chain and line["type"] == "assistant"
        if sidechain and not _synthetic(line, message):
            session.response(number, line, message, main=False)
    for number, line in chain:
        message = session.message(number, line)
        if line["type"] == "user":
            session.user(number, line, message)
            continue
        if _synthetic(line, message):
            continue
        response = session.response(number, line, message)
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for j, block in enumerate(blocks):
            if not isinstance(block, dict):
                raise session.fail(number, f"message.content[{j}]", "a block must be a JSON object")
        response.blocks.extend((number, j, block) for j, block in enumerate(blocks))
        if message.get("id") is None and any(
            isinstance(block, dict) and block.get("type") in CALL_BLOCKS for block in blocks
        ):
            session.ungrouped = True
    return _record(session)


def _record(session: _Session) -> AgentRecord:
    steps: list[tuple[ToolCall, ...]] = []
    turns: list[Turn] = []
    split: TurnSplit[tuple[ToolCall, ...]] = TurnSplit()
    text: str | None = None
    for entry in session.turns:
        if isinstance(entry, Turn):
            turns.append(entry)
            if entry.role == "user":
                split.user(entry.text)
            continue
        response = session.responses[entry]
        said = content_text([block for _, _, block in response.blocks])
        turns.append(Turn("assistant", said))
        if said:
            text = said
            split.answer(said)
        calls = session.calls(response)
        if calls:
            steps.append(tuple(calls))
            split.step(steps[-1])
    usage = _usage([*session.responses.values(), *session.side.values()])
    unseen: dict[Evidence, str] = {}
    if steps and session.ungrouped:
        unseen[Evidence.PARALLEL] = NO_GROUPING
    return transcript_record(
        FORMAT,
        steps,
        turns,
        text,
        usage,
        session.moments,
        unseen,
        split.exchanges(tuple),
        no_usage=NO_USAGE,
        no_text=NO_TEXT,
    )


def _usage(responses: list[_Response]) -> UsageFigures:
    reported = [response for response in responses if response.has_usage]
    if not reported:
        return UsageFigures()
    costs = [response.cost for response in reported]
    return UsageFigures(
        input_tokens=sum(
            response.usage.get(name, 0)
            for response in reported
            for name in USAGE_FIELDS
            if name != "output_tokens"
        ),
        output_tokens=sum(response.usage.get("output_tokens", 0) for response in reported),
        cost_usd=None if None in costs else sum(cost or 0.0 for cost in costs),
    )
