"""The one record every intake source yields per case, and what that record could show.

Whatever the agent left behind — a JSONL line with `output`, an OpenAI Chat / Responses,
Anthropic or LangChain message list, an OTLP trace, an ATIF, Claude Code or Codex transcript —
an intake source turns it into an `AgentRecord`: the final text, the turns, the tool calls as a
`Trajectory` (steps of calls one model response requested together), usage figures, and
**what the record could show** (`Evidence`). A record that could not show some evidence names
it in `unseen` with the reason, worded from the *format*, never from the content
(`OpenAI messages cannot mark a failed call`). A check that needs unseen evidence is
`unavailable` (see `assay.runs.scoring`): not scored and counted against coverage, never a pass.

A record that *shows* zero calls (a complete message list; an LLM output captured with no tool
call part) is evidence of zero: its tool names are seen and its trajectory is empty. A record of
more than `MAX_TOOL_CALLS_PER_OUTPUT` calls is refused (`TooManyCalls`), whatever its source:
each source's caller names the file, the line and the field.

Text, turns and arguments are candidate outputs: they live in memory only, for the checks, and
never reach the evidence store, Prefect or a log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final, Literal

from assay.trajectory import Trajectory


class Evidence(StrEnum):
    """One kind of evidence a record may or may not show."""

    TEXT = "text"
    """The agent's final answer text."""
    TOOL_NAMES = "tool names"
    """Which tools were called (and that none were, when none were)."""
    TOOL_ARGUMENTS = "tool arguments"
    """The arguments of each call."""
    TOOL_STATUS = "tool status"
    """Whether each call failed."""
    PARALLEL = "parallel structure"
    """Which calls one model response requested together."""
    USAGE = "usage"
    """Token (and cost) figures."""


MAX_TOOL_CALLS_PER_OUTPUT: Final = 5_000
"""The most tool calls one output (a message list, a trace, a transcript) may hold. It bounds
the work and memory of the trajectory checks (`assay.scorers.trajectory`), which compare
reference calls with the agent's calls, while lying far beyond the agent runs a reference
trajectory is written for."""

TOOL_EVIDENCE: Final = (
    Evidence.TOOL_NAMES,
    Evidence.TOOL_ARGUMENTS,
    Evidence.TOOL_STATUS,
    Evidence.PARALLEL,
)


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of the conversation: who said it and its text ("" when it carried none)."""

    role: Literal["system", "user", "assistant", "tool"]
    text: str


@dataclass(frozen=True, slots=True)
class UsageFigures:
    """Token and cost figures; None where the record did not report the figure."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    @property
    def known(self) -> bool:
        return (self.input_tokens, self.output_tokens, self.cost_usd) != (None, None, None)


@dataclass(frozen=True, slots=True)
class Exchange:
    """One turn of a conversation: a user's message, then what the agent did and answered
    before the next one (docs/conversations.md). A turn is scored like a one-answer record."""

    user: str
    """What the user said ("" when the record holds no user message before the first answer)."""
    text: str | None
    """The agent's last answer in this turn; None when the turn holds none."""
    trajectory: Trajectory
    """The calls the agent made in this turn, step after step."""


class TooManyCalls(ValueError):
    """A record of more than `MAX_TOOL_CALLS_PER_OUTPUT` tool calls (`found` of them, or at
    least that many)."""

    def __init__(self, found: int) -> None:
        self.problem = (
            f"{found:,} tool calls: an output may hold at most {MAX_TOOL_CALLS_PER_OUTPUT:,}"
            " (MAX_TOOL_CALLS_PER_OUTPUT)"
        )
        super().__init__(self.problem)


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """One case as its record tells it, with what the record could not show.

    Raises:
        TooManyCalls: the trajectory holds more than `MAX_TOOL_CALLS_PER_OUTPUT` calls.
    """

    source: str
    """The intake format that read it (`openai-chat`, `otlp`, `atif`, …)."""
    text: str | None
    """The final answer; None when the record did not capture text."""
    trajectory: Trajectory
    """The calls seen, step after step (empty when none were seen)."""
    unseen: Mapping[Evidence, str] = field(default_factory=dict)
    """Evidence this record could not show, each with why (worded from the format)."""
    turns: tuple[Turn, ...] = ()
    exchanges: tuple[Exchange, ...] = ()
    """The record split into turns at each user message; empty when the source cannot tell
    where a turn begins (`conversation` then reads the whole record as one turn)."""
    usage: UsageFigures = UsageFigures()
    duration_ms: float | None = None

    def __post_init__(self) -> None:
        calls = sum(len(step) for step in self.trajectory.steps)
        if calls > MAX_TOOL_CALLS_PER_OUTPUT:
            raise TooManyCalls(calls)

    def shows(self, evidence: Evidence) -> bool:
        return evidence not in self.unseen

    def conversation(self) -> tuple[Exchange, ...]:
        """The record's turns: its exchanges, or the whole record as one turn."""
        if self.exchanges:
            return self.exchanges
        user = next((turn.text for turn in self.turns if turn.role == "user"), "")
        return (Exchange(user=user, text=self.text, trajectory=self.trajectory),)


def unseen_tools(reason: str) -> dict[Evidence, str]:
    """Every kind of tool evidence unseen, for one reason."""
    return dict.fromkeys(TOOL_EVIDENCE, reason)
