"""ATIF (Agent Trajectory Interchange Format) trajectories: one `trajectory.json` is one case.

ATIF is the JSON document Harbor (the terminal-bench harness) and the agents it wraps write for
one run: a root object `{schema_version: "ATIF-v1.N", session_id, agent, steps, final_metrics,
…}` whose `steps` are the system prompt, the user's messages and the agent's turns. This reader
follows Harbor RFC 0001 at v1.7 and reads every v1.x (later versions only added optional fields;
v1.8's audio parts read as parts without text).

Mapping (what maps to what):

- A step with `source: "agent"` is one agent turn: its `tool_calls` [{tool_call_id,
  function_name, arguments}] are one trajectory step (the calls one model output requested;
  RFC: "a single LLM output may contain multiple tool calls"). `arguments` is a JSON object (a
  JSON string is parsed too); `tool_call_id` is the call id.
- Turns: `system` / `user` steps are system / user turns, an `agent` step an assistant turn
  (its `message`: a string, or the `text` of its ContentPart array), and each
  `observation.results[]` entry of an agent step a tool turn (its `content`; a system step's
  results, from system-initiated operations such as context compaction, are system turns).
- The final text is the message of the last agent step that has text; None when no agent step
  has any.
- Usage: `final_metrics.total_prompt_tokens` / `total_completion_tokens` / `total_cost_usd`
  (the run's totals, subagents included, cached prompt tokens included); where a total is
  absent, the sum of the steps' `metrics.prompt_tokens` / `completion_tokens` / `cost_usd`.
- Duration: from the first to the last step `timestamp` (ISO 8601), when two steps have one.
- Steps marked `is_copied_context: true` were copied from an earlier trajectory for context
  (RFC: "not a new interaction") and are left out: no turn, no call, no text, and their
  metrics are not summed (`final_metrics`, when given, is the producer's own total).
- Subagents (`observation.results[].subagent_trajectory_ref`, root `subagent_trajectories`)
  are not followed: the parent's delegating call is its call; the subagent's own calls are not
  this trajectory's.

Unseen, and why:

- `tool status`: an observation result has `source_call_id` and `content` but no field that
  marks a failed call (a tool's error is only its content text), so "ATIF observation results
  cannot mark a failed tool call". Every call reads as not failed.
- `parallel structure`, only when an agent step with two or more calls has `llm_call_count`
  above 1: its calls then came from several model outputs merged into one step.
- `usage`, when neither `final_metrics` nor any step's `metrics` gives a figure.
- `text`, when no agent step has text.

Errors name the field (`steps[3].tool_calls[0].arguments`) and, for malformed JSON, the line;
never a value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final, Literal

from assay.errors import InputError
from assay.intake.exchanges import TurnSplit
from assay.intake.record import AgentRecord, Evidence, Turn, UsageFigures
from assay.intake.transcript_json import (
    leading_members,
    reject_constant,
    timestamp,
    transcript_record,
)
from assay.trajectory import ArgumentsError, ToolCall, parse_arguments

FORMAT: Final = "atif"
DESCRIBED_BY: Final = (
    "Harbor RFC 0001 'Agent Trajectory Interchange Format (ATIF) Specification', v1.7 "
    "(harbor-framework/harbor, formerly laude-institute/harbor, "
    "docs/rfcs/0001-trajectory-format.md, April 2026 revision), checked against the "
    "pydantic models of harbor 0.26.0 on PyPI (harbor/models/trajectories/); example shapes "
    "from Harbor's golden trajectories as copied into meridianlabs-ai/inspect_scout "
    "tests/sources/atif_source/fixtures @ 63b481d6"
)

NO_STATUS: Final = "ATIF observation results cannot mark a failed tool call"
MERGED_STEPS: Final = "an ATIF step with llm_call_count above 1 merges several model outputs"
NO_USAGE: Final = "the trajectory has no final_metrics and no step metrics"
NO_TEXT: Final = "the trajectory has no agent message with text"

SCHEMA_VERSION: Final = re.compile(r"ATIF-v1\.\d+")
_ROOT_KEYS: Final = frozenset(
    {
        "schema_version",
        "session_id",
        "trajectory_id",
        "agent",
        "steps",
        "notes",
        "final_metrics",
        "continued_trajectory_ref",
        "extra",
        "subagent_trajectories",
    }
)
_VERSION_IN_HEAD: Final = re.compile(r'"schema_version"\s*:\s*"ATIF-v1\.\d+"')
_ROLES: Final[Mapping[str, Literal["system", "user", "assistant"]]] = {
    "system": "system",
    "user": "user",
    "agent": "assistant",
}


def detect(head: bytes) -> bool:
    """A JSON object whose top-level `schema_version` is `ATIF-v1.N`.

    When a long member (an agent's tool definitions) cuts the head before `schema_version`,
    the head still reads as ATIF if every top-level key seen is an ATIF root key and the head
    holds an ATIF `schema_version`.
    """
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    members = leading_members(text)
    if not members:
        return False
    version = members.get("schema_version")
    if isinstance(version, str):
        return SCHEMA_VERSION.fullmatch(version) is not None
    return members.keys() <= _ROOT_KEYS and _VERSION_IN_HEAD.search(text) is not None


class _Reader:
    """Field access that raises the format's one-line errors (`source`, field path, never a
    value)."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str | None, problem: str, line: int | None = None) -> InputError:
        return InputError(self.source, problem, line=line, field=field)

    def obj(self, value: Any, field: str, what: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field, f"{what} must be a JSON object")
        return value

    def items(self, value: Any, field: str, what: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(field, f"{what} must be a JSON array")
        return value

    def text(self, value: Any, field: str, what: str) -> str:
        """A message or content: a string, or the `text` of its ContentPart array ("" for
        None, image and audio parts)."""
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise self.fail(field, f"{what} must be a string or an array of content parts")
        parts = []
        for k, part in enumerate(value):
            if not isinstance(part, dict):
                raise self.fail(f"{field}[{k}]", "a content part must be a JSON object")
            if part.get("type") == "text":
                if not isinstance(part.get("text"), str):
                    raise self.fail(f"{field}[{k}].text", "a text part needs a string text")
                parts.append(part["text"])
        return "".join(parts)

    def count(self, value: Any, field: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(field, "must be a whole number of tokens, 0 or more")
        return value

    def cost(self, value: Any, field: str) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise self.fail(field, "must be a cost in USD, 0 or more")
        return float(value)


def _document(raw: bytes, source: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError:
        raise InputError(source, "not UTF-8 text") from None
    try:
        value = json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(source, "malformed JSON", line=exc.lineno) from None
    except (ValueError, RecursionError):
        raise InputError(source, "malformed JSON (NaN, Infinity or too deeply nested)") from None
    if not isinstance(value, dict):
        raise InputError(source, "an ATIF trajectory must be a JSON object")
    return value


def _calls(reader: _Reader, step: dict[str, Any], where: str) -> list[ToolCall]:
    calls = []
    entries = reader.items(step.get("tool_calls"), f"{where}.tool_calls", "tool_calls")
    for j, entry in enumerate(entries):
        at = f"{where}.tool_calls[{j}]"
        call = reader.obj(entry, at, "a tool call")
        name, call_id = call.get("function_name"), call.get("tool_call_id")
        if not isinstance(name, str) or not name:
            raise reader.fail(f"{at}.function_name", "a tool call needs a function_name")
        if not isinstance(call_id, str):
            raise reader.fail(f"{at}.tool_call_id", "a tool call needs a string tool_call_id")
        arguments = call.get("arguments")
        if isinstance(arguments, str):
            try:
                arguments = parse_arguments(arguments, f"{at}.arguments")
            except ArgumentsError as exc:
                raise reader.fail(exc.field, exc.problem) from None
        elif not isinstance(arguments, dict):
            raise reader.fail(f"{at}.arguments", "tool call arguments must be a JSON object")
        calls.append(ToolCall(name, arguments, call_id))
    return calls


def read(raw: bytes, source: str) -> AgentRecord:
    """The record of one ATIF trajectory file.

    Raises:
        InputError: not UTF-8, malformed JSON (naming the line), or a field of the wrong shape
            (naming the field, e.g. `steps[3].tool_calls[0].arguments`) — never a value.
    """
    reader = _Reader(source)
    root = _document(raw, source)
    version = root.get("schema_version")
    if not isinstance(version, str) or SCHEMA_VERSION.fullmatch(version) is None:
        raise reader.fail("schema_version", "schema_version must be ATIF-v1.N")
    steps: list[tuple[ToolCall, ...]] = []
    turns: list[Turn] = []
    split: TurnSplit[tuple[ToolCall, ...]] = TurnSplit()
    text: str | None = None
    merged = False
    prompt: list[int] = []
    completion: list[int] = []
    costs: list[float] = []
    moments: list[datetime] = []
    if "steps" not in root:
        raise reader.fail("steps", "an ATIF trajectory needs steps")
    for i, entry in enumerate(reader.items(root["steps"], "steps", "steps")):
        where = f"steps[{i}]"
        step = reader.obj(entry, where, "a step")
        source_role = step.get("source")
        role = _ROLES.get(source_role) if isinstance(source_role, str) else None
        if role is None:
            raise reader.fail(f"{where}.source", "source must be system, user or agent")
        if "message" not in step:
            raise reader.fail(f"{where}.message", "a step needs a message (it may be empty)")
        message = reader.text(step["message"], f"{where}.message", "message")
        if step.get("is_copied_context") is True:
            continue
        moment = timestamp(step.get("timestamp"), source, f"{where}.timestamp")
        if moment is not None:
            moments.append(moment)
        turns.append(Turn(role, message))
        if role == "user":
            split.user(message)
        if role == "assistant":
            if message:
                text = message
                split.answer(message)
            calls = _calls(reader, step, where)
            if calls:
                steps.append(tuple(calls))
                split.step(steps[-1])
                llm_calls = step.get("llm_call_count")
                merged |= len(calls) > 1 and isinstance(llm_calls, int) and llm_calls > 1
            metrics = step.get("metrics")
            if metrics is not None:
                at = f"{where}.metrics"
                metrics = reader.obj(metrics, at, "metrics")
                tokens_in = reader.count(metrics.get("prompt_tokens"), f"{at}.prompt_tokens")
                tokens_out = reader.count(
                    metrics.get("completion_tokens"), f"{at}.completion_tokens"
                )
                cost = reader.cost(metrics.get("cost_usd"), f"{at}.cost_usd")
                prompt += [] if tokens_in is None else [tokens_in]
                completion += [] if tokens_out is None else [tokens_out]
                costs += [] if cost is None else [cost]
        observation = step.get("observation")
        if observation is not None:
            at = f"{where}.observation"
            observation = reader.obj(observation, at, "observation")
            results = reader.items(observation.get("results"), f"{at}.results", "results")
            for k, result in enumerate(results):
                result = reader.obj(result, f"{at}.results[{k}]", "an observation result")
                content = reader.text(
                    result.get("content"), f"{at}.results[{k}].content", "content"
                )
                turns.append(Turn("tool" if role == "assistant" else "system", content))
    usage = _usage(reader, root.get("final_metrics"), prompt, completion, costs)
    unseen: dict[Evidence, str] = {}
    if steps:
        unseen[Evidence.TOOL_STATUS] = NO_STATUS
        if merged:
            unseen[Evidence.PARALLEL] = MERGED_STEPS
    return transcript_record(
        FORMAT,
        steps,
        turns,
        text,
        usage,
        moments,
        unseen,
        split.exchanges(tuple),
        no_usage=NO_USAGE,
        no_text=NO_TEXT,
    )


def _usage(
    reader: _Reader, final: Any, prompt: list[int], completion: list[int], costs: list[float]
) -> UsageFigures:
    """The run's totals from `final_metrics`, each absent one summed from the steps."""
    totals = {} if final is None else reader.obj(final, "final_metrics", "final_metrics")
    tokens_in = reader.count(totals.get("total_prompt_tokens"), "final_metrics.total_prompt_tokens")
    tokens_out = reader.count(
        totals.get("total_completion_tokens"), "final_metrics.total_completion_tokens"
    )
    cost = reader.cost(totals.get("total_cost_usd"), "final_metrics.total_cost_usd")
    return UsageFigures(
        input_tokens=tokens_in if tokens_in is not None else (sum(prompt) if prompt else None),
        output_tokens=(
            tokens_out if tokens_out is not None else (sum(completion) if completion else None)
        ),
        cost_usd=cost if cost is not None else (sum(costs) if costs else None),
    )
