"""Score one chunk of cases: read its slice of outputs, score, persist the evidence, drop the text.

Scoring and persisting are one task so that a chunk's evidence never becomes a task argument:
Prefect walks every argument of a task run (to resolve futures and record inputs), which for a
2,000-case chunk cost more than the scoring itself. Re-running the task after a failed write
re-scores the chunk, which is deterministic, and re-writes identical bytes, which is a no-op.
"""

from __future__ import annotations

import gc
import threading
from functools import lru_cache

from prefect import task

from assay.gcpause import gc_paused
from assay.hashing import OutputHasher, store_secret
from assay.judge.service import NO_JUDGE_NEEDED
from assay.outputs.slices import read_slice
from assay.process_state import remembered
from assay.runs.chunks import EvidenceChunk, write_chunk
from assay.runs.judging import ChunkJudgement, judge_chunk, suite_judge_setup
from assay.runs.metrics import tally
from assay.runs.pipeline import CaseRow, ChunkJob, ChunkSummary
from assay.runs.sampling import select_cases
from assay.runs.scoring import CompiledSuite, score_missing, score_outputs
from assay.scorers import Status
from assay.suites import registry
from blocks.judge_settings import judge_setup
from tasks._log import run_log
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.batch_wait import waits_shown

TABLE_ROWS_PER_CHUNK = 200
_CPU_BOUND = threading.Lock()
"""Chunks with no judge calls only compute, holding the GIL: in one process they score one at a
time, which finishes sooner than threads taking the GIL from each other every few milliseconds
(measured: a 100,000-case run 21-24 s with four chunks interleaved, 16-19 s one at a time).
Chunks that call a judge overlap their calls."""
_PREPARING = threading.Lock()
"""Chunks scored in parallel threads compile a suite once, not once per thread."""


def _prepared(
    store: str, suite_ref: str, sample: int | None, seed: int
) -> tuple[CompiledSuite, frozenset[str]]:
    """Compiled scorers and the selected case ids, once per process for an immutable version."""
    with _PREPARING:
        return _compiled(store, suite_ref, sample, seed)


@lru_cache(maxsize=4)
def _compiled(
    store: str, suite_ref: str, sample: int | None, seed: int
) -> tuple[CompiledSuite, frozenset[str]]:
    _, suite = registry.resolve(evidence_store(store), suite_ref)
    selected = select_cases([case.id for case in suite.cases], sample, seed)
    compiled = CompiledSuite.compile(suite)
    # The suite and its case index live for the whole run: move them out of the collector's
    # sight so that full collections during scoring do not rescan a 100,000-case object graph.
    gc.freeze()
    return compiled, frozenset(selected)


remembered(__name__, "_compiled", _compiled.cache_clear)


def _summarise(evidence: EvidenceChunk, written: bool) -> ChunkSummary:
    worst_first = sorted(evidence.cases, key=lambda case: case.status == "pass")
    rows = [
        CaseRow(case_id=c.case_id, status=c.status, score=c.score, label=c.label)
        for c in worst_first[:TABLE_ROWS_PER_CHUNK]
    ]
    return ChunkSummary(
        chunk=evidence.chunk, written=written, metrics=tally(evidence.cases), rows=rows
    )


@task(name="score-chunk", task_run_name="score chunk {job.chunk}", **IO_RETRIES)
def score_chunk(job: ChunkJob) -> ChunkSummary:
    """Score the outputs in the job's slice (or its missing cases, which have none) and persist
    them.

    The evidence holds verdicts, keyed hashes and redacted labels; it is written write-once.
    """
    # Only module functions here: a Dask worker receives this function pickled by value, with
    # the globals it names (a module function travels by reference, a lock cannot travel).
    return _scored(job)


def _scored(job: ChunkJob) -> ChunkSummary:
    compiled, selected = _prepared(job.store, job.suite_ref, job.sample, job.seed)
    if compiled.judged:  # their judge calls overlap: chunks run side by side
        return _score_and_persist(job, compiled, selected)
    with _CPU_BOUND, gc_paused():  # what a chunk allocates is acyclic, and dropped with it
        return _score_and_persist(job, compiled, selected)


def _score_and_persist(
    job: ChunkJob, compiled: CompiledSuite, selected: frozenset[str]
) -> ChunkSummary:
    target = evidence_store(job.store)
    setup = NO_JUDGE_NEEDED
    judged = ChunkJudgement(outcomes={})
    if job.piece is None:
        cases = score_missing(compiled, job.missing)
    else:
        hasher = OutputHasher(store_secret(target))
        outputs = list(read_slice(job.piece, selected))
        if compiled.judged:  # a suite without llm_judge checks has nothing to look for
            # Launched where no judge is configured: none, whatever this process's environment.
            if job.judge_block or job.judge:
                setup = suite_judge_setup(
                    judge_setup(
                        job.judge_block, job.fresh_judge, job.judge_repeats, config=job.judge
                    ),
                    compiled.suite,
                )
                setup = waits_shown(setup)  # a batch's wait: the task run's state message
            judged = judge_chunk(
                target,
                compiled,
                outputs,
                hasher,
                setup,
                run_id=job.run_id,
                chunk=job.chunk,
                subject=job.subject,
            )
        cases = score_outputs(compiled, outputs, hasher, judged.outcomes)
    evidence = EvidenceChunk(run_id=job.run_id, chunk=job.chunk, cases=cases)
    summary = _summarise(evidence, write_chunk(target, evidence))
    summary.metrics.judge_calls = judged.calls
    summary.metrics.judge_cache_hits = judged.cache_hits
    summary.metrics.judge_cost_usd = judged.cost_usd
    verdicts = [o.status for o in judged.outcomes.values() if o.status is not Status.SKIPPED]
    summary.metrics.judged_checks = len(verdicts)
    summary.metrics.judged_checks_passed = verdicts.count(Status.PASS)
    summary.metrics.repeated_checks = judged.repeated
    summary.metrics.unanimous_checks = judged.unanimous
    summary.metrics.split_checks = judged.split
    summary.metrics.judge_calls_over_bound = judged.over_bound
    summary.budget = judged.decision
    summary.redactions = judged.redactions
    summary.judge_repeats = setup.repeats
    summary.jury = judged.jury
    if setup.model and setup.prompt_version:
        summary.judge = setup.pin
    m = summary.metrics
    run_log().info(
        "chunk %d: %d case(s), %d passed, %d failed, %d skipped, %d missing, %d error(s); "
        "%d judge call(s), %d cache hit(s)",
        job.chunk,
        m.cases,
        m.passed,
        m.failed,
        m.skipped,
        m.missing,
        m.errors,
        m.judge_calls,
        m.judge_cache_hits,
    )
    return summary
