"""Per-case results of a run, as `assay runs cases` and `GET /runs/{id}/cases` show them: each
case's id, status, score and its checks' labels — built from the evidence, so no output text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Literal

from pydantic import BaseModel, Field

from assay.runs.chunks import read_cases
from assay.runs.scoring import CaseEvidence
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


class CaseResult(BaseModel):
    """One case of a run: id, status, score, label and checks."""

    case_id: str
    trial: int | None = Field(default=None, exclude_if=lambda trial: trial is None)
    """Which trial of the case (outputs with `trial`); left out without one."""
    status: Status
    score: float | None
    label: str
    checks: list[CheckSummary]

    @classmethod
    def of(cls, case: CaseEvidence) -> CaseResult:
        """The result shown for one case's evidence."""
        return cls(
            case_id=case.case_id,
            trial=case.trial,
            status=case.status,
            score=case.score,
            label=case.label,
            checks=[
                CheckSummary(
                    scorer=check.scorer,
                    kind=check.kind,
                    status=check.status,
                    score=check.score,
                    label=check.reason,
                )
                for check in case.checks
            ],
        )


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
