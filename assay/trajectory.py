"""Tool-call trajectories: what an agent did, as steps of calls, and the reference a case expects.

A trajectory is a sequence of *steps*; the calls of one step were made together (the calls one
model response requested), and steps follow one another. Each call has its tool's name, its
parsed JSON arguments, its call id and whether it failed. Reading them from what an agent left
behind (messages, traces, transcripts) is `assay.intake`'s job.

Tool arguments and results are candidate outputs: they live in memory only, for the checks of
`assay.scorers.trajectory`, and never reach the evidence store, Prefect or a log.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final

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
