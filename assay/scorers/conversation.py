"""Conversation-level checks: what a whole recorded conversation must hold (docs/conversations.md).

`max_turns`: the record holds at most N turns (a turn begins at each user message), so an agent
that needs the user to ask again and again fails it.
"""

from __future__ import annotations

from pydantic import Field

from assay.scorers._registry import PASS, Observation, Outcome, Scorer, ScorerConfig, fail, scorer


class MaxTurnsConfig(ScorerConfig):
    """`max_turns`: the conversation ends within `value` turns."""

    value: int = Field(ge=1, le=10_000)


@scorer("max_turns", MaxTurnsConfig, shorthand="value")
def max_turns(config: MaxTurnsConfig) -> Scorer:
    """Pass when the record holds at most `value` turns."""

    def observe(observed: Observation) -> Outcome:
        if observed.turns <= config.value:
            return PASS
        return fail(f"{observed.turns} turns > {config.value}")

    return Scorer("max_turns", f"max_turns {config.value}", observe=observe, needs=frozenset())
