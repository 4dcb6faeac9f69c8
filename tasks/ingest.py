"""Ingest: validate candidate outputs by reference and cut them into chunks."""

from __future__ import annotations

from prefect import get_run_logger, task

from assay.outputs.reference import OutputsReference
from assay.outputs.slices import OutputsIndex
from assay.runs.sampling import index_run_outputs
from assay.suites import registry
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="ingest-outputs", task_run_name="ingest {outputs.location}", **IO_RETRIES)
def ingest_outputs(
    store: str,
    suite_ref: str,
    outputs: OutputsReference,
    sample: int | None,
    seed: int,
    chunk_size: int,
) -> OutputsIndex:
    """Stream-validate the outputs against the suite; return byte ranges, never text. The
    index the launcher built in this process from the same unchanged outputs is taken as is
    (`assay.runs.sampling`)."""
    _, suite = registry.resolve(evidence_store(store), suite_ref)
    index = index_run_outputs(suite, outputs, sample, seed, chunk_size)
    warning = index.warning()
    if warning:
        get_run_logger().warning(warning)
    return index
