"""The pairwise report (SPEC §8): counts, rates and references — never text.

Written once as `comparisons/<comparison_id>.json`.
"""

from __future__ import annotations

from typing import Final

from pydantic import AwareDatetime, BaseModel, Field

from assay.finops.budget import Decision
from assay.judge.port import JudgePin
from assay.multiplicity import Family
from assay.rate import Rate
from assay.store import EvidenceStore

REPORT_PREFIX: Final = "comparisons/"


class WinRate(Rate):
    """Wins of one side over the judged pairs, with its 95% Wilson interval (None when n = 0)."""

    wins: int
    n: int
    """Judged pairs: the denominator."""


class PositionConsistency(Rate):
    """Pairs whose two orders agreed, over the judged pairs, with its 95% Wilson interval."""

    consistent: int
    judged: int


class PairwiseReport(BaseModel):
    """The outcome of one pairwise comparison: counts, rates and references — never text.

    Counts: `cases_compared` pairs were put to the judge (shared cases with a rubric);
    `unjudged` of them got no verdict in at least one order; the `judged` rest split into
    `wins_a + wins_b + ties + inconsistent`. Cases not compared are counted apart:
    `without_rubric` (no `llm_judge` check), `missing_a` / `missing_b` (a rubric but no output
    on that side; a case missing on both sides counts in both).
    """

    comparison_id: str
    suite: str
    suite_version: int
    label_a: str
    label_b: str
    outputs_a: str
    outputs_b: str
    subject: str
    """The budget and ledger subject of this comparison (`comparison:<A>-vs-<B>`)."""
    cases: int
    """Cases in the suite version."""
    without_rubric: int
    missing_a: int
    missing_b: int
    cases_compared: int
    judged: int
    unjudged: int
    unjudged_reasons: dict[str, int] = Field(default_factory=dict)
    """Why pairs were unjudged (the judge's skip vocabulary), with counts."""
    wins_a: int
    wins_b: int
    ties: int
    """Pairs where both orders answered tie."""
    inconsistent: int
    """Pairs whose two orders disagreed (position bias); a tie in the win rates."""
    win_rate_a: WinRate
    win_rate_b: WinRate
    position_consistency: PositionConsistency
    judge: JudgePin
    calls: int
    """Judge calls made (one per order not found in the cache)."""
    cache_hits: int
    """Order verdicts answered by the cache."""
    cost_usd: float
    budget: Decision | None = None
    """The FinOps preflight's decision, when there were calls to make."""
    occurred_at: AwareDatetime
    slices: Family | None = Field(default=None, exclude_if=lambda slices: slices is None)
    """Per tag of the judged cases: A's wins against B's, a sign test each, adjusted together
    (`assay.multiplicity.win_slices`); left out when the cases carry no tags."""


def report_key(comparison_id: str) -> str:
    """Where a comparison's report is kept: `comparisons/<comparison_id>.json`."""
    return f"{REPORT_PREFIX}{comparison_id}.json"


def load_report(store: EvidenceStore, comparison_id: str) -> PairwiseReport:
    """A recorded comparison (raises `NotFoundError` when there is none)."""
    return PairwiseReport.model_validate_json(store.get(report_key(comparison_id)))
