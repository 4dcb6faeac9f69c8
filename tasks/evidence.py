"""Evidence tasks: start a run, persist chunks, finish with the EvalResult."""

from __future__ import annotations

from prefect import task
from pydantic import BaseModel

from assay.runs import (
    EvalResult,
    EvidenceChunk,
    RunAggregate,
    RunPlan,
    finish_run,
    start_run,
    write_chunk,
)
from assay.scoring import RunMetrics, tally
from assay.store import open_store
from tasks._options import IO_RETRIES

TABLE_ROWS_PER_CHUNK = 200


class CaseRow(BaseModel):
    """One row of the per-case table artifact (no output text)."""

    case_id: str
    status: str
    score: float | None
    label: str


class ChunkSummary(BaseModel):
    """What the flow keeps of a persisted chunk: counts and a few table rows."""

    chunk: int
    written: bool
    metrics: RunMetrics
    rows: list[CaseRow]


@task(name="start-run", **IO_RETRIES)
def start_run_task(store: str, plan: RunPlan) -> RunAggregate:
    """Record the run as started in its mutable aggregate and in the run index."""
    return start_run(open_store(store), plan)


@task(name="persist-chunk", task_run_name="persist chunk {evidence.chunk}", **IO_RETRIES)
def persist_chunk(store: str, evidence: EvidenceChunk) -> ChunkSummary:
    """Write one chunk of per-case evidence, write-once (a retry of the same chunk is a no-op)."""
    written = write_chunk(open_store(store), evidence)
    worst_first = sorted(evidence.cases, key=lambda case: case.status == "pass")
    rows = [
        CaseRow(case_id=c.case_id, status=c.status, score=c.score, label=c.label)
        for c in worst_first[:TABLE_ROWS_PER_CHUNK]
    ]
    return ChunkSummary(
        chunk=evidence.chunk, written=written, metrics=tally(evidence.cases), rows=rows
    )


@task(name="finish-run", **IO_RETRIES)
def finish_run_task(store: str, aggregate: RunAggregate, metrics: RunMetrics) -> EvalResult:
    """Write the run's EvalResult and mark the aggregate completed."""
    return finish_run(open_store(store), aggregate, metrics)
