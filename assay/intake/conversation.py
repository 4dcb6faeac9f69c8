"""What every message-list reader shares: the record it builds, the text of a message's content,
and the errors it raises.

A message list is *complete*: it shows every call the agent made, so a list with no call is
evidence of zero calls. What a format cannot show (OpenAI messages have no place to mark a failed
call) is `unseen`, with the reason worded from the format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from assay.intake.record import (
    AgentRecord,
    Evidence,
    Exchange,
    TooManyCalls,
    Turn,
    UsageFigures,
)
from assay.trajectory import ToolCall, Trajectory


class MessagesError(ValueError):
    """A message list that does not read as its format; `field` names where
    (`messages[2].content[0].input`), the problem never echoes a value."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(problem)
        self.field = field
        self.problem = problem


def text_of(content: Any, kinds: Iterable[str] = ("text",), key: str = "text") -> str:
    """A message's text: the string itself, or the text of its parts of `kinds` joined
    ("" for neither). A part without a `type` is text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        wanted = tuple(kinds)  # compared, never hashed: a part's `type` may be any JSON
        return "".join(
            part[key]
            for part in content
            if isinstance(part, dict)
            and part.get("type", "text") in wanted
            and isinstance(part.get(key), str)
        )
    return ""


def built(
    source: str,
    text: str | None,
    steps: list[list[ToolCall]],
    turns: list[Turn],
    exchanges: tuple[Exchange, ...],
    unseen: Mapping[Evidence, str] | None = None,
    usage: UsageFigures | None = None,
) -> AgentRecord:
    """The record of a complete message list: zero calls is evidence of zero (what could not
    be shown about calls does not matter when there are none); usage is the line's own;
    `exchanges` are its turns (`assay.intake.exchanges`).

    Raises:
        MessagesError: more than `MAX_TOOL_CALLS_PER_OUTPUT` calls (field `messages`).
    """
    missing = dict(unseen or {})
    if not any(steps):
        for evidence in (Evidence.TOOL_ARGUMENTS, Evidence.TOOL_STATUS, Evidence.PARALLEL):
            missing.pop(evidence, None)
    if text is None:
        missing[Evidence.TEXT] = "the messages hold no answer from the agent"
    try:
        return AgentRecord(
            source=source,
            text=text,
            trajectory=Trajectory(tuple(tuple(step) for step in steps if step)),
            unseen=missing,
            turns=tuple(turns),
            exchanges=exchanges,
            usage=usage or UsageFigures(),
        )
    except TooManyCalls as exc:
        raise MessagesError("messages", exc.problem) from None
