"""Prefect artifacts for a run: markdown summary, per-case table, progress."""

from __future__ import annotations

import re
from typing import cast
from uuid import UUID

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from assay import progress
from assay.runs.records import EvalResult, RunAggregate, update_aggregate
from assay.runs.render import markdown_summary
from assay.runs.scorecard import scorecard
from assay.runs.scoring import RunMetrics
from tasks._store import evidence_store
from tasks.scoring import CaseRow

TABLE_ROW_LIMIT = 1000


def artifact_key(*parts: str) -> str:
    """An artifact key from free text: lowercase letters, digits and dashes only."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


def publish_run_artifacts(result: EvalResult, rows: list[CaseRow]) -> None:
    """Markdown summary and per-case table (worst cases first; capped, and says so)."""
    key = artifact_key("assay", result.suite, result.subject_id, result.variant or "")
    create_markdown_artifact(
        markdown=markdown_summary(result),
        key=f"{key}-summary",
        description=f"Assay run summary for {result.suite}@{result.suite_version}",
    )
    shown = sorted(rows, key=lambda row: (row.status == "pass", row.case_id))[:TABLE_ROW_LIMIT]
    total = result.metrics.cases
    note = "" if len(shown) == total else f" (showing {len(shown)} of {total}, failures first)"
    create_table_artifact(
        table=[row.model_dump() for row in shown],
        key=f"{key}-cases",
        description=f"Per-case verdicts and redacted labels{note}; no output text.",
    )


def publish_scorecard(store: str) -> None:
    """The scorecard of every subject × suite as a table artifact (after each nightly run)."""
    rows = scorecard(evidence_store(store))
    create_table_artifact(
        table=[row.model_dump(mode="json") for row in rows],
        key="assay-scorecard",
        description="Per subject and suite: latest and pooled pass rate (Wilson 95%), trend.",
    )


class ProgressReporter:
    """Keeps the progress artifact and the mutable run aggregate in step with finished chunks."""

    def __init__(self, store: str, aggregate: RunAggregate) -> None:
        self._store = store
        self._aggregate = aggregate
        self._artifact: UUID | None = None
        if aggregate.chunks > 1:
            created = create_progress_artifact(
                progress=0.0, description=f"Scoring {aggregate.cases} cases"
            )
            self._artifact = cast(UUID, created)  # sync call: returns the id, not a coroutine

    def chunk_done(self, metrics: RunMetrics) -> None:
        """Record one more finished chunk and the running counts."""
        aggregate = self._aggregate
        aggregate.chunks_done += 1
        aggregate.metrics = metrics
        update_aggregate(evidence_store(self._store), aggregate)
        progress.report(aggregate.chunks_done, aggregate.chunks)
        if self._artifact is not None:
            update_progress_artifact(
                self._artifact, progress=100.0 * aggregate.chunks_done / aggregate.chunks
            )
