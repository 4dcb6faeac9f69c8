"""OpenAI Responses API items (`response.output`, or a conversation as the Agents SDK's
`result.to_input_list()` gives it).

Mapping: `function_call` items {call_id, name, arguments} are calls; the calls between two inputs
(a `function_call_output` or a user / system / developer message) came from one model response
and are one step. The final text is the last assistant `message` item's `output_text` parts (an
assistant message given as `{role, content}` reads too). Reasoning items carry no text. Input
messages are `{role, content}` (content a string or `input_text` parts). Turns: a user message
begins one; its answer is the last assistant `message` item's text before the next.

Unseen: a `function_call_output` has no field marking a failed call (a tool's error is just its
output text), so `tool status` is unseen ("OpenAI Responses items cannot mark a failed call").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from assay.intake.conversation import MessagesError, built, text_of
from assay.intake.exchanges import TurnSplit
from assay.intake.record import AgentRecord, Evidence, Turn
from assay.trajectory import ArgumentsError, ToolCall, parse_arguments

FORMAT: Final = "openai-responses"
NO_STATUS: Final = "OpenAI Responses items cannot mark a failed call"
ITEM_TYPES: Final = (
    "function_call",
    "function_call_output",
    "reasoning",
    "web_search_call",
    "file_search_call",
)
_TEXT_PARTS: Final = ("output_text", "input_text", "text")


def detect(messages: Sequence[Any]) -> bool:
    """Any typed Responses item, or message content in `input_text` / `output_text` parts."""
    for item in messages:
        if not isinstance(item, dict):
            continue
        if item.get("type") in ITEM_TYPES:
            return True
        content = item.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") in ("output_text", "input_text")
            for part in content
        ):
            return True
    return False


def _assistant(item: dict[str, Any]) -> bool:
    return item.get("type", "message") == "message" and item.get("role") == "assistant"


def final_text(messages: Sequence[Any]) -> str | None:
    for item in reversed(messages):
        if isinstance(item, dict) and _assistant(item):
            return text_of(item.get("content"), _TEXT_PARTS)
    return None


def read(messages: Sequence[Any], field: str = "messages") -> AgentRecord:
    """The record of a list of Responses items.

    Raises:
        MessagesError: an item that is not an object, a call without a name, or arguments that
            are not a JSON object — naming the field, never a value.
    """
    steps: list[list[ToolCall]] = [[]]
    turns: list[Turn] = []
    split: TurnSplit[list[ToolCall]] = TurnSplit()
    for i, item in enumerate(messages):
        where = f"{field}[{i}]"
        if not isinstance(item, dict):
            raise MessagesError(where, "a Responses item must be a JSON object")
        kind = item.get("type", "message")
        if kind == "function_call":
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise MessagesError(f"{where}.name", "a function_call needs a name")
            arguments = item.get("arguments", "")
            if not isinstance(arguments, str):
                raise MessagesError(f"{where}.arguments", "arguments must be a JSON string")
            try:
                args = parse_arguments(arguments, f"{where}.arguments")
            except ArgumentsError as exc:
                raise MessagesError(exc.field, exc.problem) from None
            call_id = item.get("call_id")
            steps[-1].append(ToolCall(name, args, call_id if isinstance(call_id, str) else None))
            if len(steps[-1]) == 1:  # the split keeps this list, so later calls join it there
                split.step(steps[-1])
        elif kind == "function_call_output":
            output = item.get("output")
            turns.append(Turn("tool", text_of(output, _TEXT_PARTS)))
            if steps[-1]:
                steps.append([])
        elif kind == "message":
            role = item.get("role")
            text = text_of(item.get("content"), _TEXT_PARTS)
            if role == "assistant":
                turns.append(Turn("assistant", text))
                split.answer(text)
            else:
                turns.append(Turn("user" if role == "user" else "system", text))
                if role == "user":
                    split.user(text)
                if steps[-1]:
                    steps.append([])
    exchanges = split.exchanges(tuple)
    return built(
        FORMAT, final_text(messages), steps, turns, exchanges, {Evidence.TOOL_STATUS: NO_STATUS}
    )
