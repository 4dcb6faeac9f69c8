"""LangChain message dicts: `messages_to_dict` (`{type, data}`), a message's `model_dump()`
(`{type, content, tool_calls, …}`) and the serialised constructor form (`{lc, id, kwargs}`) —
what a LangGraph state's `messages` holds.

Mapping: an AI message's `tool_calls` [{name, args, id}] are one step (one model response
requested them; `additional_kwargs.tool_calls` in the OpenAI shape when `tool_calls` is absent);
a ToolMessage with `status: "error"` marks its call (`tool_call_id`) failed (LangChain writes
`"success"` otherwise, so status is always seen). The final text is the last AI message's
content; usage is the sum of the AI messages' `usage_metadata`. Turns: a human (or `chat`)
message begins one; its answer is the last AI message's content before the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from assay.intake.conversation import MessagesError, built, text_of
from assay.intake.exchanges import TurnSplit
from assay.intake.record import AgentRecord, Turn, UsageFigures
from assay.trajectory import ArgumentsError, ToolCall, parse_arguments

FORMAT: Final = "langchain"
TYPES: Final = {
    "human": "user",
    "ai": "assistant",
    "tool": "tool",
    "system": "system",
    "function": "tool",
    "AIMessageChunk": "assistant",
    "chat": "user",
}
_CLASSES: Final = {
    "HumanMessage": "human",
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "ToolMessage": "tool",
    "SystemMessage": "system",
}


def _fields(message: Any) -> tuple[str, dict[str, Any]] | None:
    """The message's LangChain type and its fields, in any of the three shapes."""
    if not isinstance(message, dict):
        return None
    if message.get("lc") and isinstance(message.get("kwargs"), dict):
        named = message.get("id")
        last = named[-1] if isinstance(named, list) and named else None
        kind = _CLASSES.get(last) if isinstance(last, str) else None
        return (kind, message["kwargs"]) if kind else None
    data = message.get("data")
    kind = message.get("type")
    if not isinstance(kind, str):
        return None
    if isinstance(data, dict) and kind in TYPES:
        return str(kind), data
    if kind in TYPES and "role" not in message:
        return str(kind), message
    return None


def detect(messages: Sequence[Any]) -> bool:
    """Every message is a LangChain message dict."""
    return bool(messages) and all(_fields(m) is not None for m in messages)


def final_text(messages: Sequence[Any]) -> str | None:
    for message in reversed(messages):
        found = _fields(message)
        if found is not None and TYPES[found[0]] == "assistant":
            return text_of(found[1].get("content"))
    return None


def _calls(fields: dict[str, Any], where: str, failed: set[str]) -> list[ToolCall]:
    calls: list[ToolCall] = []
    listed = fields.get("tool_calls")
    if isinstance(listed, list) and listed:
        for j, call in enumerate(listed):
            spot = f"{where}.tool_calls[{j}]"
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise MessagesError(f"{spot}.name", "a tool call needs a name")
            args = call.get("args", {})
            if not isinstance(args, dict):
                raise MessagesError(f"{spot}.args", "tool call args must be a JSON object")
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            calls.append(ToolCall(call["name"], args, call_id, call_id in failed))
        return calls
    extra = fields.get("additional_kwargs")
    openai_calls = extra.get("tool_calls") if isinstance(extra, dict) else None
    for j, call in enumerate(openai_calls if isinstance(openai_calls, list) else []):
        spot = f"{where}.additional_kwargs.tool_calls[{j}].function"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise MessagesError(f"{spot}.name", "a tool call needs a name")
        try:
            args = parse_arguments(str(function.get("arguments") or ""), f"{spot}.arguments")
        except ArgumentsError as exc:
            raise MessagesError(exc.field, exc.problem) from None
        call_id = call.get("id") if isinstance(call.get("id"), str) else None
        calls.append(ToolCall(function["name"], args, call_id, call_id in failed))
    return calls


def _count(usage: Any, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read(messages: Sequence[Any], field: str = "messages") -> AgentRecord:
    """The record of a list of LangChain message dicts.

    Raises:
        MessagesError: a message that is not one, or a call of the wrong shape — naming the
            field, never a value.
    """
    read_fields: list[tuple[str, dict[str, Any]]] = []
    for i, message in enumerate(messages):
        found = _fields(message)
        if found is None:
            raise MessagesError(f"{field}[{i}].type", "not a LangChain message")
        read_fields.append(found)
    failed = {
        f["tool_call_id"]
        for kind, f in read_fields
        if kind == "tool" and f.get("status") == "error" and isinstance(f.get("tool_call_id"), str)
    }
    steps: list[list[ToolCall]] = []
    turns: list[Turn] = []
    tokens: dict[str, list[int]] = {"input_tokens": [], "output_tokens": []}
    split: TurnSplit[list[ToolCall]] = TurnSplit()
    for i, (kind, fields) in enumerate(read_fields):
        role = TYPES[kind]
        turns.append(Turn(role, text_of(fields.get("content"))))  # type: ignore[arg-type]
        if role == "user":
            split.user(turns[-1].text)
        if role != "assistant":
            continue
        split.answer(turns[-1].text)
        where = f"{field}[{i}]" + (".data" if isinstance(messages[i].get("data"), dict) else "")
        steps.append(_calls(fields, where, failed))
        split.step(steps[-1])
        for key, counted in tokens.items():
            value = _count(fields.get("usage_metadata"), key)
            if value is not None:
                counted.append(value)
    figures = UsageFigures(*(sum(counted) if counted else None for counted in tokens.values()))
    exchanges = split.exchanges(tuple)
    return built(FORMAT, final_text(messages), steps, turns, exchanges, usage=figures)
