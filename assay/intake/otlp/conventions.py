"""What Assay reads from the GenAI semantic conventions (and OpenInference): output text and usage.

One place for the attribute names, so that scoring traces and monitoring root spans agree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from assay.otel.traces import AttributeValue, Span

OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
OPENINFERENCE_OUTPUT: Final = "output.value"
LEGACY_COMPLETION: Final = "gen_ai.completion"
_LEGACY_INDEXED: Final = re.compile(r"^gen_ai\.completion\.(\d+)\.(content|role)$")
_OPENINFERENCE_INDEXED: Final = re.compile(
    r"^llm\.output_messages\.(\d+)\.message\.(content|role)$"
)
"""OpenInference's flattened output messages (the OpenAI Agents SDK, LlamaIndex, …)."""
_OPENINFERENCE_CALLS: Final = re.compile(
    r"^llm\.output_messages\.(\d+)\.message\.tool_calls\.(\d+)\.tool_call\."
    r"(id|function\.name|function\.arguments)$"
)
"""OpenInference's flattened tool calls of an LLM span's output messages."""
_LEGACY_CALLS: Final = re.compile(
    r"^gen_ai\.completion\.(\d+)\.tool_calls\.(\d+)\.(id|name|arguments)$"
)
"""OpenLLMetry's flattened tool calls of a completion."""
LLM_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content"})
INPUT_MESSAGES: Final = "gen_ai.input.messages"
_INPUT_INDEXED: Final = (
    re.compile(r"^llm\.input_messages\.(\d+)\.message\.(content|role)$"),
    re.compile(r"^gen_ai\.prompt\.(\d+)\.(content|role)$"),
)
"""OpenInference's and OpenLLMetry's flattened input messages."""

INPUT_TOKENS: Final = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
OUTPUT_TOKENS: Final = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
"""The GenAI names, their deprecated forms and OpenInference's (`llm.token_count.*`)."""
Number = TypeVar("Number", int, float)

COST_USD: Final = "gen_ai.usage.cost"
"""Not in the conventions yet; Langfuse and OpenLLMetry-based stacks write it in US dollars."""


def is_output_attribute(name: str) -> bool:
    """Whether `output_text` or `requested_calls` may read the attribute `name`."""
    return name in (OUTPUT_MESSAGES, OPENINFERENCE_OUTPUT, LEGACY_COMPLETION) or bool(
        name.startswith(("llm.output_messages.", "gen_ai.completion."))
        and (
            _LEGACY_INDEXED.match(name)
            or _OPENINFERENCE_INDEXED.match(name)
            or _OPENINFERENCE_CALLS.match(name)
            or _LEGACY_CALLS.match(name)
        )
    )


def output_captured(attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether a model span captured its output messages (content capture was on): then the
    calls it requested are all in them, and none is evidence of none."""
    return any(
        name in (OUTPUT_MESSAGES, LEGACY_COMPLETION)
        or name.startswith(("llm.output_messages.", "gen_ai.completion."))
        for name in attributes
    )


def is_input_attribute(name: str) -> bool:
    """Whether `user_inputs` may read the attribute `name`."""
    return name == INPUT_MESSAGES or (
        name.startswith(("llm.input_messages.", "gen_ai.prompt."))
        and any(pattern.match(name) for pattern in _INPUT_INDEXED)
    )


def user_inputs(attributes: Mapping[str, AttributeValue]) -> list[str] | None:
    """The texts of the user messages in a span's input messages, in order (a user message of
    only `tool_call_response` parts is the tools' answer, not the user's); None when the span
    recorded no input messages: `gen_ai.input.messages`, else OpenInference's
    `llm.input_messages.N.message.*`, else OpenLLMetry's `gen_ai.prompt.N.*`."""
    messages = _messages(attributes.get(INPUT_MESSAGES))
    if messages is not None:
        users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
        texts = []
        for message in users:
            parts = [p for p in message.get("parts") or [] if isinstance(p, dict)]
            if parts and all(part.get("type") == "tool_call_response" for part in parts):
                continue
            content = message.get("content")
            said = [p["content"] for p in parts if isinstance(p.get("content"), str)]
            texts.append(content if isinstance(content, str) else "".join(said))
        return texts
    for pattern in _INPUT_INDEXED:
        entries: dict[int, dict[str, Any]] = {}
        for key, value in attributes.items():
            match = pattern.match(key)
            if match:
                entries.setdefault(int(match[1]), {})[match[2]] = value
        if entries:
            return [
                str(fields.get("content") or "")
                for _, fields in sorted(entries.items())
                if fields.get("role") == "user"
            ]
    return None


@dataclass(frozen=True, slots=True)
class RequestedCall:
    """A tool call a model span's output asked for: its tool, its arguments (None when not a
    JSON object, or not given) and its call id."""

    tool: str
    arguments: dict[str, Any] | None
    call_id: str | None


def requested_calls(attributes: Mapping[str, AttributeValue]) -> list[RequestedCall]:
    """The tool calls of a model span's output messages, in order: `tool_call` parts of
    `gen_ai.output.messages`, else OpenInference's `llm.output_messages.N.message.tool_calls.M`,
    else OpenLLMetry's `gen_ai.completion.N.tool_calls.M`."""
    messages = _messages(attributes.get(OUTPUT_MESSAGES))
    if messages is not None:
        return [
            RequestedCall(part["name"], _arguments(part.get("arguments")), _id(part.get("id")))
            for message in filter(_assistant, messages)
            for part in message.get("parts") or []
            if isinstance(part, dict)
            and part.get("type") == "tool_call"
            and isinstance(part.get("name"), str)
        ]
    for pattern, name_key in ((_OPENINFERENCE_CALLS, "function.name"), (_LEGACY_CALLS, "name")):
        entries: dict[tuple[int, int], dict[str, Any]] = {}
        for key, value in attributes.items():
            match = pattern.match(key)
            if match:
                entries.setdefault((int(match[1]), int(match[2])), {})[match[3]] = value
        if entries:
            return [
                RequestedCall(
                    fields[name_key],
                    _arguments(fields.get(name_key.replace("name", "arguments"))),
                    _id(fields.get("id")),
                )
                for _, fields in sorted(entries.items())
                if isinstance(fields.get(name_key), str)
            ]
    return []


def _arguments(value: Any) -> dict[str, Any] | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value) if value.strip() else {}
        except (ValueError, RecursionError):
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def is_llm_span(attributes: Mapping[str, AttributeValue]) -> bool:
    """Whether a span is a model call (`gen_ai.operation.name` chat, …, or OpenInference LLM);
    reading it needs `gen_ai.operation.name` and `openinference.span.kind`."""
    return (
        attributes.get("gen_ai.operation.name") in LLM_OPERATIONS
        or attributes.get("openinference.span.kind") == "LLM"
    )


def is_usage_attribute(name: str) -> bool:
    """Whether `span_usage` reads the attribute `name`."""
    return name in INPUT_TOKENS or name in OUTPUT_TOKENS or name == COST_USD


def output_text(attributes: Mapping[str, AttributeValue]) -> str | None:
    """A span's output: the text parts of the assistant messages in `gen_ai.output.messages`,
    joined by newlines; else OpenInference's `llm.output_messages.N.message.content`; else
    `output.value` (the last AI message when it holds a LangChain / LangGraph state with
    `messages`, in any LangChain message shape; no text when the state has no AI message);
    else the legacy `gen_ai.completion` (a string, a JSON list of messages, or OpenLLMetry's
    `gen_ai.completion.N.content`)."""
    messages = _messages(attributes.get(OUTPUT_MESSAGES))
    if messages is not None:
        return _join(_text_parts(messages))
    indexed = _indexed(attributes, _OPENINFERENCE_INDEXED)
    if indexed is not None:
        return indexed
    value = attributes.get(OPENINFERENCE_OUTPUT)
    if isinstance(value, str):
        state = _state_messages(value)
        if state is None:
            return value
        from assay.intake.messages import final_text

        return final_text(state)
    legacy = attributes.get(LEGACY_COMPLETION)
    if isinstance(legacy, str):
        listed = _messages(legacy)
        return legacy if listed is None else _join(_contents(listed))
    return _indexed(attributes, _LEGACY_INDEXED)


def _state_messages(value: str) -> list[Any] | None:
    """The `messages` of a JSON state (a LangChain / LangGraph state: LangChain messages in any
    of their dict shapes, or `{role, content}`); None when `value` is not one."""
    if not value.startswith("{"):
        return None
    try:
        state = json.loads(value)
    except ValueError:
        return None
    messages = state.get("messages") if isinstance(state, dict) else None
    return messages if isinstance(messages, list) else None


def _messages(value: AttributeValue) -> list[Any] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, list) else None


def _assistant(message: Any) -> bool:
    return isinstance(message, dict) and message.get("role", "assistant") == "assistant"


def _text_parts(messages: Iterable[Any]) -> Iterable[str]:
    for message in filter(_assistant, messages):
        for part in message.get("parts") or []:
            if isinstance(part, dict) and part.get("type") == "text":
                content = part.get("content")
                if isinstance(content, str):
                    yield content


def _contents(messages: Iterable[Any]) -> Iterable[str]:
    for message in filter(_assistant, messages):
        content = message.get("content")
        if isinstance(content, str):
            yield content


def _indexed(attributes: Mapping[str, AttributeValue], pattern: re.Pattern[str]) -> str | None:
    entries: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        match = pattern.match(key)
        if match:
            entries.setdefault(int(match[1]), {})[match[2]] = value
    if not entries:
        return None
    return _join(_contents(entries[i] for i in sorted(entries)))


def _join(parts: Iterable[str]) -> str | None:
    texts = list(parts)
    return "\n".join(texts) if texts else None


@dataclass(frozen=True, slots=True)
class SpanUsage:
    """Token and cost figures summed over spans; None where no span reported the figure."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


def _count(span: Span, names: tuple[str, ...]) -> int | None:
    for name in names:
        value = span.attributes.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


def _cost(span: Span) -> float | None:
    value = span.attributes.get(COST_USD)
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


def _add(total: Number | None, value: Number | None) -> Number | None:
    if value is None:
        return total
    return value if total is None else total + value


def span_usage(span: Span) -> SpanUsage:
    """`gen_ai.usage.input_tokens` / `output_tokens` (or the deprecated `prompt_tokens` /
    `completion_tokens`) and `gen_ai.usage.cost` of one span."""
    return SpanUsage(
        input_tokens=_count(span, INPUT_TOKENS),
        output_tokens=_count(span, OUTPUT_TOKENS),
        cost_usd=_cost(span),
    )


def combined(parts: Iterable[SpanUsage]) -> SpanUsage:
    """Figures added field by field; None where no part had the figure."""
    total = SpanUsage()
    for part in parts:
        total = SpanUsage(
            input_tokens=_add(total.input_tokens, part.input_tokens),
            output_tokens=_add(total.output_tokens, part.output_tokens),
            cost_usd=_add(total.cost_usd, part.cost_usd),
        )
    return total


def usage(spans: Iterable[Span]) -> SpanUsage:
    """The usage figures of `spans`, summed."""
    return combined(span_usage(span) for span in spans)
