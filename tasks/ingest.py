"""Ingest: validate candidate outputs by reference and cut them into chunks."""

from __future__ import annotations

from prefect import task

from assay.outputs import OutputsIndex, index_outputs
from assay.runs.sampling import select_cases
from assay.suites import registry
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="ingest-outputs", task_run_name="ingest {outputs}", **IO_RETRIES)
def ingest_outputs(
    store: str, suite_ref: str, outputs: str, sample: int | None, seed: int, chunk_size: int
) -> OutputsIndex:
    """Stream-validate the outputs against the suite; return byte ranges, never text."""
    _, suite = registry.resolve(evidence_store(store), suite_ref)
    case_ids = [case.id for case in suite.cases]
    selected = select_cases(case_ids, sample, seed)
    return index_outputs(outputs, set(case_ids), selected, chunk_size)
