"""The llm_judge scorer.

Verdicts come from the judge port, batched per chunk in `assay.runs.judging`, which overrides this
scorer's own check. Left to itself (no judge configured) every `llm_judge` check fails closed: it
is `skipped` with its reason, excluded from denominators and counted — never a pass.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, field_validator, model_serializer

from assay.errors import shown
from assay.scorers._registry import Outcome, Scorer, ScorerConfig, Status, quote, scorer

NO_JUDGE = Outcome(Status.SKIPPED, 0.0, "no judge configured")


class LlmJudgeConfig(ScorerConfig):
    """`llm_judge`: a judge model grades the output against a rubric."""

    rubric: str = Field(min_length=1)
    pass_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    on: Literal["output", "trajectory"] = "output"
    """What the judge grades: the final text, or the tool-call trajectory (tool names and
    arguments, redacted like any output)."""

    @field_validator("on", mode="before")
    @classmethod
    def _known(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in ("output", "trajectory"):
            raise ValueError(f"unknown on {shown(value, 40)} (known: output, trajectory)")
        return value

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

    on = " on trajectory" if config.on == "trajectory" else ""
    return Scorer("llm_judge", f"llm_judge {quote(config.rubric)}{on}", check)
