"""A run's per-case evidence, one chunk at a time (`runs/<run_id>/cases/<000000>.json`, see
`assay.runs.records` for the whole layout): writing a chunk once, and reading it back whole, or
only what a count (`read_statuses`) or a comparison (`read_verdicts`) needs.

Chunk content carries no timestamps, so a retried or re-run write of the same chunk is byte-for-
byte identical and therefore idempotent; different content under the same key is an integrity
error, never an overwrite.
"""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from assay.runs.records import load_aggregate
from assay.runs.scoring import CaseEvidence
from assay.runs.trials import decide_cases
from assay.scorers import Status
from assay.scorers.trajectory import TRAJECTORY_KINDS
from assay.store import EvidenceStore


class EvidenceChunk(BaseModel):
    """Per-case evidence for one chunk of a run."""

    run_id: str
    chunk: int
    cases: list[CaseEvidence]


class _CheckVerdict(BaseModel):
    kind: str | None = None
    status: Status


class _TurnStatus(BaseModel):
    turn: int
    status: Status
    missing: bool = False


class CaseVerdict(BaseModel):
    """What a comparison reads of one case's evidence: its id, status and checks' kinds, and a
    conversation's turns (docs/conversations.md)."""

    case_id: str
    status: Status
    checks: list[_CheckVerdict] = []
    trial: int | None = None
    turns: list[_TurnStatus] | None = None

    @property
    def trajectory_passed(self) -> bool | None:
        """Whether every scored trajectory check (`TRAJECTORY_KINDS`) passed; None without any."""
        scored = [
            c.status is Status.PASS
            for c in self.checks
            if c.kind in TRAJECTORY_KINDS and c.status is not Status.SKIPPED
        ]
        return all(scored) if scored else None


class CaseStatus(BaseModel):
    """A case's id, trial and status: what a count or a choice of cases reads of its evidence."""

    case_id: str
    status: Status
    trial: int | None = None


class _ChunkStatuses(BaseModel):
    cases: list[CaseStatus]
    """Only these fields of each case are built; the rest of the record is skipped."""


class _ChunkVerdicts(BaseModel):
    cases: list[CaseVerdict]
    """Only these fields of each case are built; the rest of the record is skipped."""


def chunk_key(run_id: str, chunk: int) -> str:
    """Key of one evidence chunk."""
    return f"runs/{run_id}/cases/{chunk:06d}.json"


def write_chunk(store: EvidenceStore, chunk: EvidenceChunk) -> bool:
    """Persist one evidence chunk (write-once; identical re-writes are no-ops)."""
    return store.put_once(chunk_key(chunk.run_id, chunk.chunk), chunk.model_dump_json().encode())


def read_chunk(store: EvidenceStore, run_id: str, chunk: int) -> EvidenceChunk:
    """Read one evidence chunk back."""
    return EvidenceChunk.model_validate_json(store.get(chunk_key(run_id, chunk)))


def read_verdicts(store: EvidenceStore, run_id: str, chunk: int) -> list[CaseVerdict]:
    """The id and status of each case of one evidence chunk: a comparison over every case of
    two runs reads these, about 4x faster than whole chunks (`read_chunk`)."""
    return _ChunkVerdicts.model_validate_json(store.get(chunk_key(run_id, chunk))).cases


def read_statuses(store: EvidenceStore, run_id: str, chunk: int) -> list[CaseStatus]:
    """The id, trial and status of each case of one evidence chunk: about 6x faster than whole
    chunks (`read_chunk`), for a report's counts over every case of a large run."""
    return _ChunkStatuses.model_validate_json(store.get(chunk_key(run_id, chunk))).cases


def read_cases(store: EvidenceStore, run_id: str) -> Iterator[CaseEvidence]:
    """Every case's evidence of a run, chunk by chunk (one chunk in memory at a time)."""
    for chunk in range(load_aggregate(store, run_id).chunks):
        yield from read_chunk(store, run_id, chunk).cases


def read_decided_cases(store: EvidenceStore, run_id: str) -> list[CaseEvidence]:
    """Every case of a run as decided: its evidence, or for a run with trials each case decided
    over its trials (label `c/n trials passed (policy)`, no per-trial checks)."""
    policy = load_aggregate(store, run_id).trials_policy
    if policy is None:
        return list(read_cases(store, run_id))
    return decide_cases(read_cases(store, run_id), policy)[0]
