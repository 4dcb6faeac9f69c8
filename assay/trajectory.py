"""Tool-call trajectories: what an agent did, as steps of calls, and the reference a case expects.

A trajectory is a sequence of *steps*; the calls of one step were made together (one assistant
message's `tool_calls`, or tool spans that overlap in time under one parent), and steps follow one
another. Each call has its tool's name, its parsed JSON arguments, its call id and whether it
failed (a `tool` message with `is_error: true`, or a tool span with status ERROR).

Tool arguments and results are candidate outputs: they live in memory only, for the checks of
`assay.scorers.trajectory`, and never reach the evidence store, Prefect or a log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.:/-]{1,128}")
"""A tool name a label may show. An agent's tool name that is anything else is not echoed."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call: the tool, its parsed JSON arguments, its id and whether it failed."""

    tool: str
    args: dict[str, Any]
    call_id: str | None = None
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Trajectory:
    """Steps of calls, in order; the calls of one step were made together (in parallel)."""

    steps: tuple[tuple[ToolCall, ...], ...]

    @property
    def calls(self) -> list[ToolCall]:
        """Every call, step after step."""
        return [call for step in self.steps for call in step]


def rendered(trajectory: Trajectory) -> str:
    """The trajectory as text for a judge: one line per step, each call its tool and arguments
    (the judge's redaction then applies to it like to any output text)."""
    lines = []
    for k, step in enumerate(trajectory.steps, start=1):
        together = " (made together)" if len(step) > 1 else ""
        calls = "; ".join(
            f"{call.tool} {json.dumps(call.args, sort_keys=True, ensure_ascii=False)}"
            + (" [failed]" if call.failed else "")
            for call in step
        )
        lines.append(f"step {k}{together}: {calls}")
    return "\n".join(lines) or "(no tool calls)"


class ArgumentsError(ValueError):
    """A call's arguments are not a JSON object; `field` names where, e.g.
    `messages[2].tool_calls[0].function.arguments`."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def parse_arguments(text: str, field: str) -> dict[str, Any]:
    """A call's arguments (a JSON object as text; empty means none) parsed, or ArgumentsError.

    The error says what is wrong, never what the arguments hold.
    """
    if not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        raise ArgumentsError(field, "tool call arguments are not valid JSON") from None
    if not isinstance(value, dict):
        raise ArgumentsError(field, "tool call arguments must be a JSON object")
    return value


# --- OpenAI chat-format messages ------------------------------------------------------------


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
    is_error: bool = False
    """The MCP / Anthropic convention for a tool result that reports a failed call."""

    @property
    def text(self) -> str:
        """The message's text: its content string, or its text parts joined."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content or [] if part.type == "text")


def final_text(messages: Sequence[Any]) -> str | None:
    """The text of the last assistant message in raw (not yet validated) messages, or None.

    Read before validation so that a record may leave out `output`; a malformed message is then
    reported by the validation itself.
    """
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "assistant":
            return content_text(message.get("content"))
    return None


def content_text(content: Any) -> str:
    """A chat message's text: the string itself, or its text parts joined ("" for neither)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type", "text") == "text"
            and isinstance(part.get("text"), str)
        )
    return ""


def trajectory_from_messages(messages: Sequence[ChatMessage]) -> Trajectory:
    """The trajectory of a conversation: each assistant message's tool calls are one step.

    A call failed when a `tool` message answering its id says `is_error: true`.

    Raises:
        ArgumentsError: a call's arguments are not a JSON object, naming the field.
    """
    failed = {
        message.tool_call_id
        for message in messages
        if message.role == "tool" and message.is_error and message.tool_call_id is not None
    }
    steps: list[tuple[ToolCall, ...]] = []
    for i, message in enumerate(messages):
        if message.role != "assistant" or not message.tool_calls:
            continue
        steps.append(
            tuple(
                ToolCall(
                    tool=call.function.name,
                    args=parse_arguments(
                        call.function.arguments,
                        f"messages[{i}].tool_calls[{j}].function.arguments",
                    ),
                    call_id=call.id,
                    failed=call.id is not None and call.id in failed,
                )
                for j, call in enumerate(message.tool_calls)
            )
        )
    return Trajectory(tuple(steps))


# --- the reference a case expects -----------------------------------------------------------


class ExpectedCall(BaseModel):
    """One call of a case's `expected_trajectory`: a tool and the arguments it should get."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tool: Annotated[str, Field(pattern=TOOL_NAME.pattern, max_length=128)]
    args: dict[str, Any] = Field(default_factory=dict)


ExpectedStep = ExpectedCall | Annotated[list[ExpectedCall], Field(min_length=1)]
"""A call, or a list of calls made together (one parallel step, its calls in any order)."""


def bare_single_calls(steps: list[ExpectedStep]) -> list[ExpectedStep]:
    """A parallel step of one call written as the call itself: one canonical form (and hash)
    for what means the same."""
    return [step[0] if isinstance(step, list) and len(step) == 1 else step for step in steps]


def reference_trajectory(steps: Sequence[ExpectedStep]) -> Trajectory:
    """A case's expected trajectory as a `Trajectory` the checks compare an agent's with."""
    return Trajectory(
        tuple(
            tuple(ToolCall(call.tool, dict(call.args)) for call in step)
            if isinstance(step, list)
            else (ToolCall(step.tool, dict(step.args)),)
            for step in steps
        )
    )
