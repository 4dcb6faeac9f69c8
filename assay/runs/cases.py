"""Per-case results of a run, as `assay runs cases` and `GET /runs/{id}/cases` show them: each
case's id, status, score and its checks' labels, and a conversation's verdict per turn — built
from the evidence, so no output text."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final, Literal

from pydantic import BaseModel, Field

from assay.runs.chunks import read_cases
from assay.runs.scoring import CaseEvidence, CheckResult
from assay.scorers import Status
from assay.store import EvidenceStore

CaseFilter = Literal["passed", "failed", "skipped", "error"]

CASE_STATUSES: Final[dict[str, frozenset[Status]]] = {
    "passed": frozenset({Status.PASS}),
    "failed": frozenset({Status.FAIL, Status.ERROR}),
    "skipped": frozenset({Status.SKIPPED}),
    "error": frozenset({Status.ERROR}),
}
"""What each status filter selects: failed counts scorer errors too, as the run's counts do."""


class CheckSummary(BaseModel):
    """One check of a case: which scorer, its status and score, and its label (why it did not
    pass, from configuration and tool names only)."""

    scorer: str
    kind: str | None
    status: Status
    score: float
    label: str


def _summaries(checks: Sequence[CheckResult]) -> list[CheckSummary]:
    return [
        CheckSummary(
            scorer=check.scorer,
            kind=check.kind,
            status=check.status,
            score=check.score,
            label=check.reason,
        )
        for check in checks
    ]


class TurnResult(BaseModel):
    """One turn of a conversation case (docs/conversations.md): its index from 1, status, score,
    label and checks — never its text. `missing`: the record ended before this turn."""

    turn: int
    status: Status
    score: float | None
    label: str
    missing: bool = False
    checks: list[CheckSummary]


TURN_WORDS: Final[dict[Status, str]] = {
    Status.PASS: "passed",
    Status.FAIL: "failed",
    Status.ERROR: "error",
    Status.SKIPPED: "skipped",
}


class CaseResult(BaseModel):
    """One case of a run: id, status, score, label and checks; a conversation's turns."""

    case_id: str
    trial: int | None = Field(default=None, exclude_if=lambda trial: trial is None)
    """Which trial of the case (outputs with `trial`); left out without one."""
    status: Status
    score: float | None
    label: str
    checks: list[CheckSummary]
    """A conversation's conversation-level checks (`max_turns`); its turns' are in `turns`."""
    turns: list[TurnResult] | None = Field(default=None, exclude_if=lambda turns: turns is None)
    """A conversation case's verdict per turn of the suite's case; left out for a one-answer
    case."""
    record_turns: int | None = Field(default=None, exclude_if=lambda count: count is None)
    """How many turns the record held (more than `turns`: the extra ones were not scored)."""

    @classmethod
    def of(cls, case: CaseEvidence) -> CaseResult:
        """The result shown for one case's evidence."""
        return cls(
            case_id=case.case_id,
            trial=case.trial,
            status=case.status,
            score=case.score,
            label=case.label,
            checks=_summaries(case.checks),
            turns=None
            if case.turns is None
            else [
                TurnResult(
                    turn=turn.turn,
                    status=turn.status,
                    score=turn.score,
                    label=turn.label,
                    missing=turn.missing,
                    checks=_summaries(turn.checks),
                )
                for turn in case.turns
            ],
            record_turns=case.record_turns,
        )

    def turns_text(self) -> str:
        """The turn column: the first turn that failed (else the first not scored) of how many —
        `2/3 failed`, `2/3 missing` (the record ended there), `3/3 skipped` — or `3/3 passed`,
        with `+1 extra` when the record held turns the case does not score; "" for a one-answer
        case."""
        if not self.turns:
            return ""
        count = len(self.turns)
        failing = [t for t in self.turns if t.status in (Status.FAIL, Status.ERROR)]
        unscored = [t for t in self.turns if t.status is Status.SKIPPED]
        shown = (failing or unscored or [self.turns[-1]])[0]
        word = "missing" if shown.missing else TURN_WORDS[shown.status]
        extra = (self.record_turns or 0) - count
        return f"{shown.turn}/{count} {word}" + (f" +{extra} extra" if extra > 0 else "")


def _selected(
    store: EvidenceStore, run_id: str, status: CaseFilter | None
) -> Iterator[tuple[int, CaseResult]]:
    wanted = CASE_STATUSES[status] if status is not None else frozenset(Status)
    for position, case in enumerate(read_cases(store, run_id)):
        if case.status in wanted:
            yield position, CaseResult.of(case)


def case_results(
    store: EvidenceStore, run_id: str, status: CaseFilter | None = None
) -> Iterator[CaseResult]:
    """Every case of a run in evidence order, or only those `status` selects."""
    for _, result in _selected(store, run_id, status):
        yield result


def case_page(
    store: EvidenceStore, run_id: str, status: CaseFilter | None, limit: int, start: int = 0
) -> tuple[list[CaseResult], int | None]:
    """Up to `limit` of the cases `case_results` lists, from evidence position `start` on, and
    the position to go on from (None when no case is left)."""
    page: list[CaseResult] = []
    for position, result in _selected(store, run_id, status):
        if position < start:
            continue
        if len(page) == limit:
            return page, position
        page.append(result)
    return page, None
