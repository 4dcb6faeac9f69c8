"""The conversation rule: a case with `turns` decided from its turns (docs/conversations.md).

A record is read as turns (`AgentRecord.conversation`: split at each user message); turn j of
the record is scored against turn j of the case by that turn's checks, as a one-answer case is
scored (`assay.runs.scoring`). The first turn the record lacks fails (`no turn j`); the later
ones are skipped (`unavailable: no turn j`), so a short record fails once, not once per turn.
Extra record turns are counted, not scored. The case's own checks see the whole record.

The policy (`conversation_passes`) decides from each turn's (passed, score); a missing turn is
(False, 0). A turn not scored (its judge unavailable) is unknown: the policy holds, or fails,
only if it would whatever that turn said (computed with it as passed at 1 and failed at 0);
otherwise the case is incomplete (`skipped`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from assay.intake.record import Evidence
from assay.outputs.candidate import CandidateOutput
from assay.scorers import Observation, Outcome, Status, clamp
from assay.scorers._registry import UNAVAILABLE
from assay.suites.suite import ConversationPasses, MeanAtLeast, MinAtLeast

TURN_JUDGE_UNAVAILABLE: Final = Outcome(
    Status.SKIPPED, 0.0, UNAVAILABLE + "an llm_judge inside a turn is not judged yet"
)
"""A turn's `llm_judge` check: unscored (against coverage, never a pass) until turns are judged."""


def no_turn(number: int) -> str:
    """The label of the first turn a record lacks."""
    return f"no turn {number}"


def turn_observations(output: CandidateOutput) -> tuple[Observation, ...]:
    """Each turn of the output's record as its checks see it (the one-answer view when the
    record cannot tell where a turn begins)."""
    record = output.record
    if record is None or not record.exchanges:
        return (Observation(output.output, output.trajectory, output.unseen),)
    calls_seen = Evidence.TOOL_NAMES not in output.unseen
    count = len(record.exchanges)
    return tuple(
        Observation(
            exchange.text or "",
            exchange.trajectory if calls_seen else None,
            output.unseen,
            turns=count,
        )
        for exchange in record.exchanges
    )


def whole_conversation(output: CandidateOutput, turns: int) -> Observation:
    """The record as its conversation-level checks see it: final text, every call, its turns."""
    return Observation(output.output, output.trajectory, output.unseen, turns=turns)


@dataclass(frozen=True, slots=True)
class TurnStanding:
    """What the policy reads of one turn: whether it passed and its score (None: not scored)."""

    passed: bool | None
    score: float | None


def policy_status(policy: ConversationPasses, turns: Sequence[TurnStanding]) -> Status:
    """PASS, FAIL or SKIPPED (it depends on a turn not scored) of the turns under `policy`."""
    best = _holds(policy, turns, unknown_passes=True)
    worst = _holds(policy, turns, unknown_passes=False)
    if worst:
        return Status.PASS
    return Status.FAIL if not best else Status.SKIPPED


def _holds(policy: ConversationPasses, turns: Sequence[TurnStanding], unknown_passes: bool) -> bool:
    passed = [unknown_passes if t.passed is None else t.passed for t in turns]
    scores = [float(unknown_passes) if t.score is None else t.score for t in turns]
    if policy == "all_turns":
        return all(passed)
    if policy == "final_turn":
        return passed[-1]
    if isinstance(policy, MeanAtLeast):
        return math.fsum(scores) / len(scores) >= policy.mean_at_least
    assert isinstance(policy, MinAtLeast)
    return min(scores) >= policy.min_at_least


def policy_score(policy: ConversationPasses, turns: Sequence[TurnStanding]) -> float | None:
    """The case's score: its turns' figure under the policy (the final turn's score under
    `final_turn`, the least under `min_at_least`, else the mean), over the scored turns."""
    if policy == "final_turn":
        return turns[-1].score
    scores = [t.score for t in turns if t.score is not None]
    if not scores:
        return None
    if isinstance(policy, MinAtLeast):
        return min(scores)
    return math.fsum(scores) / len(scores)


def deciding(policy: ConversationPasses, count: int) -> range:
    """The indexes of the turns the policy reads (the final one only under `final_turn`)."""
    return range(count - 1, count) if policy == "final_turn" else range(count)


def policy_words(policy: ConversationPasses, turns: Sequence[TurnStanding]) -> str:
    """What a label says of a mean or least score against its bound (`mean 0.50 < 0.70`)."""
    if isinstance(policy, MeanAtLeast | MinAtLeast):
        figure = policy_score(policy, turns)
        bound = policy.mean_at_least if isinstance(policy, MeanAtLeast) else policy.min_at_least
        name = "mean" if isinstance(policy, MeanAtLeast) else "min"
        if figure is not None:
            relation = "≥" if figure >= bound else "<"
            return f"{name} {figure:.2f} {relation} {bound:.2f}"
    return ""


def turn_prefix(number: int, count: int) -> str:
    """How a case label names one of its turns: `turn 3 of 5`."""
    return f"turn {number} of {count}"


def joined(*parts: str) -> str:
    """Label parts, the empty ones left out, within the label limit."""
    return clamp("; ".join(part for part in parts if part))
