"""Anthropic Messages API conversations (`[{role, content}]`, content a string or blocks).

Mapping: the `tool_use` blocks {id, name, input} of one assistant message are one step (one
model response requested them); `input` is the arguments object. A user message's `tool_result`
block {tool_use_id, is_error} marks its call failed when `is_error` is true (absent means it did
not fail: the API's own default, so status is always seen). The final text is the last assistant
message's `text` blocks joined.

Turns: a `user` message begins one unless it holds `tool_result` blocks (then it is the tools'
answer, within the turn); its answer is the last assistant message's text before the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from assay.intake.conversation import MessagesError, built, text_of
from assay.intake.exchanges import TurnSplit
from assay.intake.record import AgentRecord, Turn
from assay.trajectory import ToolCall

FORMAT: Final = "anthropic"
TOOL_BLOCKS: Final = (
    "tool_use",
    "tool_result",
    "server_tool_use",
)


def detect(messages: Sequence[Any]) -> bool:
    """Role-keyed messages with a `tool_use` or `tool_result` content block."""
    return any(
        isinstance(message, dict)
        and isinstance(message.get("content"), list)
        and any(
            isinstance(block, dict) and block.get("type") in TOOL_BLOCKS
            for block in message["content"]
        )
        for message in messages
    )


def final_text(messages: Sequence[Any]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return text_of(message.get("content"))
    return None


def _blocks(message: dict[str, Any], where: str) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str) or content is None:
        return []
    if not isinstance(content, list):
        raise MessagesError(f"{where}.content", "content must be a string or a list of blocks")
    return content


def read(messages: Sequence[Any], field: str = "messages") -> AgentRecord:
    """The record of one Messages API conversation.

    Raises:
        MessagesError: a message or block of the wrong shape, a `tool_use` without a name or
            whose `input` is not an object — naming the field, never a value.
    """
    failed: set[str] = set()
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise MessagesError(f"{field}[{i}]", "a message must be a JSON object")
        for block in _blocks(message, f"{field}[{i}]"):
            if (
                isinstance(block, dict)
                and block.get("type") == "tool_result"
                and block.get("is_error") is True
                and isinstance(block.get("tool_use_id"), str)
            ):
                failed.add(block["tool_use_id"])
    steps: list[list[ToolCall]] = []
    turns: list[Turn] = []
    split: TurnSplit[list[ToolCall]] = TurnSplit()
    for i, message in enumerate(messages):
        role = message.get("role")
        blocks = _blocks(message, f"{field}[{i}]")
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        for result in results:
            turns.append(Turn("tool", text_of(result.get("content"))))
        if role != "assistant":
            if not results:
                turns.append(Turn("user", text_of(message.get("content"))))
                split.user(turns[-1].text)
            continue
        turns.append(Turn("assistant", text_of(message.get("content"))))
        split.answer(turns[-1].text)
        step: list[ToolCall] = []
        for j, block in enumerate(blocks):
            if not isinstance(block, dict) or block.get("type") not in (
                "tool_use",
                "server_tool_use",
            ):
                continue
            where = f"{field}[{i}].content[{j}]"
            name, args, call_id = block.get("name"), block.get("input", {}), block.get("id")
            if not isinstance(name, str) or not name:
                raise MessagesError(f"{where}.name", "a tool_use block needs a name")
            if not isinstance(args, dict):
                raise MessagesError(f"{where}.input", "tool_use input must be a JSON object")
            call = call_id if isinstance(call_id, str) else None
            step.append(ToolCall(name, args, call, call is not None and call in failed))
        steps.append(step)
        split.step(step)
    return built(FORMAT, final_text(messages), steps, turns, split.exchanges(tuple))
