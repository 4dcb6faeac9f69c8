"""What the judge is asked to reply, and reading its replies: the reply contracts (schema,
strict parser, skipped verdict) of grading and pairwise prompts, and the few fields the adapter
reads from a chat completion's JSON body — defensively, since any OpenAI-compatible server may
answer (`assay.judge.openai_adapter`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from assay.judge.port import PairVerdict, Verdict, Winner
from assay.judge.prompts import (
    PAIR_SCHEMA,
    VERDICT_SCHEMA,
    VerdictReply,
    parse_pair_reply,
    parse_verdict_reply,
)

ReplyCoT = TypeVar("ReplyCoT", covariant=True)
AnswerT = TypeVar("AnswerT")


@dataclass(frozen=True)
class ReplyContract(Generic[ReplyCoT, AnswerT]):
    """What a prompt asks the judge to reply: the schema (and its name), the strict parser, and
    the skipped verdict when no reply parses."""

    name: str
    schema: dict[str, Any]
    parse: Callable[[str | None], ReplyCoT]
    skipped: Callable[..., AnswerT]


def graded(threshold: float | None, reply: VerdictReply, stamp: dict[str, Any]) -> Verdict:
    """A grading reply's verdict: the judge's own, or score >= `threshold` when there is one."""
    passed = reply.verdict == "pass" if threshold is None else reply.score >= threshold
    return Verdict(status="pass" if passed else "fail", score=reply.score, **stamp)


def compared(winner: Winner, stamp: dict[str, Any]) -> PairVerdict:
    """A pairwise reply's verdict: the winning position."""
    return PairVerdict(status="judged", winner=winner, **stamp)


VERDICT_CONTRACT: Final = ReplyContract(
    "verdict", VERDICT_SCHEMA, parse_verdict_reply, Verdict.skipped
)

PAIR_CONTRACT: Final = ReplyContract(
    "pairwise_verdict", PAIR_SCHEMA, parse_pair_reply, PairVerdict.skipped
)


def _member(value: object, name: str) -> object:
    return value.get(name) if isinstance(value, dict) else None


def reply_text(completion: object) -> str | None:
    """The first choice's message text; None when the body is not a usable completion."""
    choices = _member(completion, "choices")
    if not isinstance(choices, list) or not choices:
        return None
    content = _member(_member(choices[0], "message"), "content")
    return content if isinstance(content, str) else None


def finish_reason(completion: object) -> object:
    """Why the first choice ended (`stop`, `length`, …); None when the body has no choice."""
    choices = _member(completion, "choices")
    if not isinstance(choices, list) or not choices:
        return None
    return _member(choices[0], "finish_reason")


def usage(completion: object) -> tuple[int, int]:
    """(prompt_tokens, completion_tokens) as reported; 0 for what is absent or nonsensical."""
    usage = _member(completion, "usage")

    def count(name: str) -> int:
        value = _member(usage, name)
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    return count("prompt_tokens"), count("completion_tokens")
