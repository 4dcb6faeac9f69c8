"""The llm_judge scorer.

Verdicts come from the judge port, batched per chunk in `assay.runs.judging`, which overrides this
scorer's own check. Left to itself (no judge configured) every `llm_judge` check fails closed: it
is `skipped` with its reason, excluded from denominators and counted — never a pass.

`on: conversation` judges the record's whole conversation (every message, by role) instead of its
final text; its rubric may name a shipped template instead of being written out
(`CONVERSATION_RUBRICS`: `goal_completion`, `knowledge_retention`, `role_adherence`).
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, get_args

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from assay.errors import shown
from assay.scorers._registry import Outcome, Scorer, ScorerConfig, Status, quote, scorer

NO_JUDGE = Outcome(Status.SKIPPED, 0.0, "no judge configured")

Judged = Literal["output", "trajectory", "conversation"]
JUDGED: Final[tuple[str, ...]] = get_args(Judged)
CONVERSATION_RUBRICS: Final = ("goal_completion", "knowledge_retention", "role_adherence")
"""Rubric templates a conversation check may name instead of writing its rubric (their texts:
`assay/judge/prompts/rubric.<name>.txt`)."""
_TEMPLATE_NAME = re.compile(r"[a-z]+(?:_[a-z]+)+")


class LlmJudgeConfig(ScorerConfig):
    """`llm_judge`: a judge model grades the output against a rubric."""

    rubric: str = Field(min_length=1)
    pass_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    on: Judged = "output"
    """What the judge grades: the final text, the tool-call trajectory (tool names and
    arguments), or the whole conversation (every message, labelled by role) — redacted like any
    output."""

    @field_validator("on", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in JUDGED:
            raise ValueError(f"unknown on {shown(value, 40)} (known: {', '.join(JUDGED)})")
        return value

    @model_validator(mode="after")
    def _known_template(self) -> LlmJudgeConfig:
        # A one-word rubric on a conversation is a template's name: a misspelt one is an error
        # here rather than a rubric that reads "goal_completon".
        if (
            self.on == "conversation"
            and _TEMPLATE_NAME.fullmatch(self.rubric)
            and self.rubric not in CONVERSATION_RUBRICS
        ):
            raise ValueError(
                f"unknown rubric template {shown(self.rubric, 40)}"
                f" (known: {', '.join(CONVERSATION_RUBRICS)})"
            )
        return self

    @model_serializer(mode="wrap")
    def _default_left_out(self, handler: SerializerFunctionWrapHandler) -> Any:
        # `on` came after suites were published: at its default it stays out of the canonical
        # form, so their content hashes (and judge cache keys) are unchanged.
        dumped = handler(self)
        if isinstance(dumped, dict) and dumped.get("on") == "output":
            del dumped["on"]
        return dumped


@scorer("llm_judge", LlmJudgeConfig, shorthand="rubric")
def llm_judge(config: LlmJudgeConfig) -> Scorer:
    """Grade against the rubric; skipped (fail closed) while no judge is configured."""

    def check(output: str) -> Outcome:
        return NO_JUDGE

    on = "" if config.on == "output" else f" on {config.on}"
    return Scorer("llm_judge", f"llm_judge {quote(config.rubric)}{on}", check)
