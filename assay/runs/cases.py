"""Per-case results of a run, as `assay runs cases` and `GET /runs/{id}/cases` show them: each
case's id, status, score and its checks' labels — built from the evidence, so no output text."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, Literal

from pydantic import AliasChoices, BaseModel, Field

from assay.runs.records import chunk_key, load_aggregate
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
    kind: str | None = None
    status: Status
    score: float
    label: str = Field(validation_alias=AliasChoices("label", "reason"))
    """The evidence's `reason` (read from there) or this record's `label` (read from the API)."""


class CaseResult(BaseModel):
    """One case of a run: id, status, score, label and checks."""

    case_id: str
    trial: int | None = Field(default=None, exclude_if=lambda trial: trial is None)
    """Which trial of the case (outputs with `trial`); left out without one."""
    status: Status
    score: float | None
    label: str
    checks: list[CheckSummary]


class _ChunkResults(BaseModel):
    cases: list[CaseResult]
    """Validated straight from an evidence chunk: the fields a case's result shows are built,
    the rest of each record (hashes, flags) is skipped — half the time of the whole evidence."""


def read_results(store: EvidenceStore, run_id: str) -> Iterator[CaseResult]:
    """Every case's result of a run, in evidence order, one chunk in memory at a time."""
    for chunk in range(load_aggregate(store, run_id).chunks):
        yield from _ChunkResults.model_validate_json(store.get(chunk_key(run_id, chunk))).cases


def _selected(
    store: EvidenceStore, run_id: str, status: CaseFilter | None
) -> Iterator[tuple[int, CaseResult]]:
    wanted = CASE_STATUSES[status] if status is not None else frozenset(Status)
    for position, case in enumerate(read_results(store, run_id)):
        if case.status in wanted:
            yield position, case


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
