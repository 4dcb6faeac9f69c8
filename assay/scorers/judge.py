"""The llm_judge scorer.

Verdicts come from the judge port, batched per chunk in `assay.runs.judging`, which overrides this
scorer's own check. Left to itself (no judge configured) every `llm_judge` check fails closed: it
is `skipped` with its reason, excluded from denominators and counted — never a pass.
"""

from __future__ import annotations

from pydantic import Field

from assay.scorers._registry import Outcome, Scorer, ScorerConfig, Status, quote, scorer

NO_JUDGE = Outcome(Status.SKIPPED, 0.0, "no judge configured")


class LlmJudgeConfig(ScorerConfig):
    """`llm_judge`: a judge model grades the output against a rubric."""

    rubric: str = Field(min_length=1)
    pass_threshold: float | None = Field(default=None, ge=0.0, le=1.0)


@scorer("llm_judge", LlmJudgeConfig, shorthand="rubric")
def llm_judge(config: LlmJudgeConfig) -> Scorer:
    """Grade against the rubric; skipped (fail closed) while no judge is configured."""

    def check(output: str) -> Outcome:
        return NO_JUDGE

    return Scorer("llm_judge", f"llm_judge {quote(config.rubric)}", check)
