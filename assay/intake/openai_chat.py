"""OpenAI Chat Completions messages (`[{role, content, tool_calls, tool_call_id}]`).

Mapping: each assistant message's `tool_calls` are one step (one model response requested them
together), each call its `function.name`, its `function.arguments` parsed as a JSON object and
its `id`; the final text is the last assistant message's content (a string, or its `text` parts
joined). A `tool` message answering a call with `is_error: true` (the MCP / Anthropic
convention, which some exporters add) marks the call failed.

Unseen: the Chat format has no place to mark a failed call, so unless some `tool` message of the
list carries `is_error`, `tool status` is unseen ("OpenAI messages cannot mark a failed call").
Usage is not part of a message list (a JSONL line gives it as `usage`).

Turns: each `user` message begins one; its answer is the last assistant message's content
before the next (`assay.intake.exchanges`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from assay.intake.conversation import MessagesError, built, text_of
from assay.intake.exchanges import TurnSplit
from assay.intake.record import AgentRecord, Evidence, Turn
from assay.trajectory import ArgumentsError, ToolCall, parse_arguments

FORMAT: Final = "openai-chat"
NO_STATUS: Final = "OpenAI messages cannot mark a failed call"


class FunctionCall(BaseModel):
    """`function` of a tool call: the tool's name and its arguments as a JSON string."""

    model_config = ConfigDict(extra="ignore")

    name: str = Field(min_length=1)
    arguments: str = ""


class MessageToolCall(BaseModel):
    """One entry of an assistant message's `tool_calls`."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    type: Literal["function"] = "function"
    function: FunctionCall


class ContentPart(BaseModel):
    """One part of a message's content list (`{type: text, text}`; other parts carry no text)."""

    model_config = ConfigDict(extra="ignore")

    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    """One OpenAI chat-format message (system, user, assistant or tool)."""

    model_config = ConfigDict(extra="ignore")

    role: str
    content: str | list[ContentPart] | None = None
    tool_calls: list[MessageToolCall] | None = None
    tool_call_id: str | None = None
    is_error: bool | None = None
    """The MCP / Anthropic convention for a tool result that reports a failed call."""

    @property
    def text(self) -> str:
        """The message's text: its content string, or its text parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content or [] if part.type == "text")


_MESSAGES: Final = TypeAdapter(list[ChatMessage])


def detect(messages: Sequence[Any]) -> bool:
    """Role-keyed messages: the default reading of a message list."""
    return all(isinstance(m, dict) and "role" in m for m in messages)


def final_text(messages: Sequence[Any]) -> str | None:
    """The text of the last assistant message, read before validation (None: there is none)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return text_of(message.get("content"))
    return None


def read(messages: Sequence[Any], field: str = "messages") -> AgentRecord:
    """The record of one Chat Completions conversation.

    Raises:
        MessagesError: a message that is not a Chat message, or arguments that are not a JSON
            object — naming the field, never a value.
    """
    try:
        parsed = _MESSAGES.validate_python(messages)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        where = ".".join(str(step) for step in (field, *first["loc"]))
        raise MessagesError(where, first["msg"]) from None
    failed = {m.tool_call_id for m in parsed if m.role == "tool" and m.is_error and m.tool_call_id}
    marks = any(m.role == "tool" and m.is_error is not None for m in parsed)
    steps: list[list[ToolCall]] = []
    turns: list[Turn] = []
    split: TurnSplit[list[ToolCall]] = TurnSplit()
    for i, message in enumerate(parsed):
        role = message.role if message.role in ("user", "assistant", "tool") else "system"
        turns.append(Turn(role, message.text))  # type: ignore[arg-type]
        if role == "user":
            split.user(message.text)
        if role != "assistant":
            continue
        split.answer(message.text)
        if not message.tool_calls:
            continue
        try:
            steps.append(
                [
                    ToolCall(
                        tool=call.function.name,
                        args=parse_arguments(
                            call.function.arguments,
                            f"{field}[{i}].tool_calls[{j}].function.arguments",
                        ),
                        call_id=call.id,
                        failed=call.id is not None and call.id in failed,
                    )
                    for j, call in enumerate(message.tool_calls)
                ]
            )
        except ArgumentsError as exc:
            raise MessagesError(exc.field, exc.problem) from None
        split.step(steps[-1])
    text = next((m.text for m in reversed(parsed) if m.role == "assistant"), None)
    unseen = None if marks else {Evidence.TOOL_STATUS: NO_STATUS}
    return built(FORMAT, text, steps, turns, split.exchanges(tuple), unseen)
