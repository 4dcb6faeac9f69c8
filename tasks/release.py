"""Release-signal tasks: compute and record the report, publish it as a markdown artifact.

The task receives references (trials path/URI, contract path, store) and returns the
counts-only report, so no trial text becomes a Prefect parameter or result.
"""

from __future__ import annotations

from pathlib import Path

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from assay.release import (
    ReleaseReport,
    build_report,
    load_contract,
    load_trials,
    markdown_report,
    record_report,
    stop_lines,
)
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.artifacts import artifact_key


@task(name="release-report", task_run_name="release-report", **IO_RETRIES)
def release_report(store: str, trials: str, contract: str | None, report_id: str) -> ReleaseReport:
    """Load the trials and contract, measure and gate each variant, record the report once.

    A retry after a store failure returns the report already recorded under `report_id`.
    """
    report = build_report(load_trials(trials), load_contract(contract), trials, report_id)
    recorded = record_report(evidence_store(store), report)
    logger = get_run_logger()
    for line in stop_lines(recorded):
        logger.info("release stopped: %s", line)
    return recorded


def publish_release_artifact(report: ReleaseReport) -> None:
    """The release table (every rate with its denominator) and each gate's verdict, as markdown."""
    create_markdown_artifact(
        markdown=markdown_report(report),
        key=artifact_key("assay-release", Path(report.source).stem),
        description=(
            "Release signals per variant: quality, useful progress, tool effects, cost per run "
            "and per verified result, false successes, unverified completions, gates."
        ),
    )
