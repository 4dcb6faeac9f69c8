"""A record split into turns as a reader walks it in order (docs/records.md, "Turns").

A turn begins at each user message the reader marks with `user`; the agent's answers
(`answer`) and steps of calls (`step`) until the next one are that turn's. An answer or a step
before any user message opens turn 1 with user "" (the record holds no question for it); a
system message, or anything else the reader does not mark, belongs to no turn. What counts as a
user message (not an Anthropic `tool_result`, not Codex's injected context) and as an answer (an
empty assistant message or not) is each reader's, as its docstring says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from assay.intake.record import Exchange
from assay.trajectory import ToolCall, Trajectory

Step = TypeVar("Step", bound=Sized)


@dataclass(slots=True)
class _Open(Generic[Step]):
    user: str
    text: str | None = None
    steps: list[Step] = field(default_factory=list)


class TurnSplit(Generic[Step]):
    """The turns of one record, marked in reading order. `Step` is the reader's own step (the
    calls of one model response), turned into calls by `exchanges` once the reader knows them
    whole (a Codex call's status may come after its step ends)."""

    def __init__(self) -> None:
        self._turns: list[_Open[Step]] = []

    def _current(self) -> _Open[Step]:
        if not self._turns:
            self._turns.append(_Open(""))
        return self._turns[-1]

    def user(self, text: str) -> None:
        """A user message: a new turn begins."""
        self._turns.append(_Open(text))

    def answer(self, text: str) -> None:
        """An answer of the agent: the turn's text, until a later answer in the same turn."""
        self._current().text = text

    def step(self, step: Step) -> None:
        """The calls of one model response (an empty one is no step and opens no turn)."""
        if len(step):
            self._current().steps.append(step)

    def exchanges(self, calls: Callable[[Step], Sequence[ToolCall]]) -> tuple[Exchange, ...]:
        """The turns, each step's calls given by `calls`."""
        return tuple(
            Exchange(
                user=turn.user,
                text=turn.text,
                trajectory=Trajectory(tuple(tuple(calls(step)) for step in turn.steps)),
            )
            for turn in self._turns
        )
