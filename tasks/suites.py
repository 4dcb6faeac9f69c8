"""Suite resolution: a published reference, or a suite file published on the way."""

from __future__ import annotations

from prefect import task

from assay.suites import registry
from assay.suites.registry import SuiteVersion
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="resolve-suite", task_run_name="resolve {suite}", **IO_RETRIES)
def resolve_suite(store: str, suite: str) -> SuiteVersion:
    """`NAME[@VERSION]` → that published version; a suite file → published first (a no-op when
    identical to the latest version), so deployments can point at files in the repo."""
    version, _ = registry.publish_or_resolve(evidence_store(store), suite)
    return version
