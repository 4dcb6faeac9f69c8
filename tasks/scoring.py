"""Score one chunk of cases: read its slice of outputs, score, drop the text."""

from __future__ import annotations

from functools import lru_cache

from prefect import task

from assay import registry
from assay.hashing import OutputHasher, store_secret
from assay.outputs import OutputSlice, read_slice
from assay.runs import EvidenceChunk
from assay.sampling import select_cases
from assay.scoring import CompiledSuite, score_missing, score_outputs
from assay.store import open_store
from tasks._options import IO_RETRIES


@lru_cache(maxsize=4)
def _prepared(
    store: str, suite_ref: str, sample: int | None, seed: int
) -> tuple[CompiledSuite, frozenset[str]]:
    """Compiled scorers and the selected case ids, once per process for an immutable version."""
    _, suite = registry.resolve(open_store(store), suite_ref)
    selected = select_cases([case.id for case in suite.cases], sample, seed)
    return CompiledSuite.compile(suite), frozenset(selected)


@task(name="score-chunk", task_run_name="score chunk {chunk}", **IO_RETRIES)
def score_chunk(
    store: str,
    run_id: str,
    suite_ref: str,
    chunk: int,
    piece: OutputSlice | None,
    missing: list[str],
    sample: int | None,
    seed: int,
) -> EvidenceChunk:
    """Score the outputs in `piece` (or the `missing` cases, which have none).

    Returns per-case evidence only: verdicts, keyed hashes and redacted labels.
    """
    compiled, selected = _prepared(store, suite_ref, sample, seed)
    if piece is None:
        cases = score_missing(compiled, missing)
    else:
        hasher = OutputHasher(store_secret(open_store(store)))
        cases = score_outputs(compiled, read_slice(piece, selected), hasher)
    return EvidenceChunk(run_id=run_id, chunk=chunk, cases=cases)
