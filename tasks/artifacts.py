"""Prefect artifacts for a run: markdown summary (with the judge's admission), per-case table,
progress."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from typing import cast
from uuid import UUID

from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.settings import PREFECT_UI_URL

from assay import progress
from assay.admission.figures import judge_admission, markdown_lines
from assay.regression import CaseChange, case_change
from assay.runs.comparison import case_verdicts
from assay.runs.metrics import RunMetrics
from assay.runs.pipeline import CaseRow
from assay.runs.records import EvalResult, RunAggregate, update_aggregate
from assay.runs.render import markdown_summary
from assay.runs.scorecard import readable, scorecard
from tasks._store import evidence_store

TABLE_ROW_LIMIT = 1000


def artifact_key(*parts: str) -> str:
    """`assay-FLOW-NAMES…` from free text: lowercase letters, digits and dashes only, and no
    words repeated where one part begins with what the key already ends with (suite
    `support-bot`, subject `support-bot`, variant `v2` → `assay-run-support-bot-v2`)."""
    words: list[str] = []
    for part in parts:
        new = [w for w in re.sub(r"[^a-z0-9]+", "-", part.lower()).split("-") if w]
        overlap = next(
            (n for n in range(min(len(words), len(new)), 0, -1) if words[-n:] == new[:n]), 0
        )
        words += new[overlap:]
    return "-".join(words)


def _ui_base() -> str:
    """The Prefect UI's address, or "" when unknown (a relative link the UI resolves itself)."""
    ui = PREFECT_UI_URL.value()
    return str(ui).rstrip("/") if ui else ""


def run_link(flow_run_id: str) -> str:
    """A run id as a markdown link to its page in the Prefect UI."""
    return f"[`{flow_run_id}`]({_ui_base()}/runs/flow-run/{flow_run_id})"


CHANGE_ORDER: dict[CaseChange, int] = {
    "newly failing": 0,
    "unchanged": 1,
    "not compared": 1,
    "newly passing": 2,
}


def _case_table(store: str, result: EvalResult, rows: list[CaseRow]) -> list[dict[str, object]]:
    """Rows with a `vs baseline` column; newly failing cases first, then the other failures."""
    regression = result.regression
    baseline = (
        case_verdicts(evidence_store(store), regression.baseline_run)
        if regression is not None and regression.baseline_run
        else None
    )
    table: list[dict[str, object]] = []
    for row in rows:
        now = None if row.status == "skipped" else row.status == "pass"
        change = "no baseline" if baseline is None else case_change(baseline.get(row.case_id), now)
        score = None if row.score is None else round(row.score, 3)
        # id, status and the change first: what a reader scans for, visible without scrolling.
        table.append(
            {
                "case_id": row.case_id,
                "status": row.status,
                "vs baseline": change,
                "score": score,
                "label": row.label,
            }
        )
    table.sort(
        key=lambda r: (
            CHANGE_ORDER.get(cast(CaseChange, r["vs baseline"]), 1),
            r["status"] == "pass",
            str(r["case_id"]),
        )
    )
    return table[:TABLE_ROW_LIMIT]


def publish_run_artifacts(store: str, result: EvalResult, rows: list[CaseRow]) -> None:
    """Per-case table (newly failing and failing cases first; capped, and says so), then the
    markdown summary, which links to that table and ends with the judge's admission."""
    key = artifact_key("assay-run", result.suite, result.subject_id, result.variant or "")
    shown = _case_table(store, result, rows)
    total = result.metrics.cases
    note = "" if len(shown) == total else f" (showing {len(shown)} of {total}, failures first)"
    table = create_table_artifact(
        table=shown,
        key=f"{key}-cases",
        description=f"Per-case verdicts, change against the baseline and redacted labels{note}; "
        "no output text.",
    )
    cases = f"{_ui_base()}/artifacts/artifact/{cast(UUID, table)}"  # sync call: the id
    summary = markdown_summary(result, run_link, cases_link=cases)
    if result.judge is not None:
        admission = judge_admission(evidence_store(store), result.judge)
        summary = "\n".join([summary, "", *markdown_lines(admission)])
    create_markdown_artifact(
        markdown=summary,
        key=f"{key}-summary",
        description=f"Assay run summary for {result.suite}@{result.suite_version}",
    )


def publish_scorecard(store: str) -> None:
    """The scorecard of every subject × suite as a table artifact (after each nightly run):
    the readable figures; `assay scorecard --format json` exports every one."""
    rows = scorecard(evidence_store(store))
    create_table_artifact(
        table=[readable(row) for row in rows],
        key="assay-scorecard",
        description="Per subject and suite: runs, latest pass rate (Wilson 95%), trend per run. "
        "Every figure: `assay scorecard --format json`.",
    )


PROGRESS_SECONDS = 1.0
"""How often at most a run's progress is written (the aggregate and the progress artifact): a
100,000-case run finishes a chunk every ~0.1 s, and a write per chunk — the aggregate rewritten,
an HTTP call to Prefect — cost it ~2 s (bench/README.md)."""


class ProgressReporter:
    """Keeps the progress artifact and the mutable run aggregate in step with finished chunks,
    written for the first chunk, then at most every `interval` seconds, and once more by `flush`
    at the end: a reader of the aggregate (the service's event stream) sees the chunks in
    batches, each once, in order."""

    def __init__(
        self,
        store: str,
        aggregate: RunAggregate,
        interval: float = PROGRESS_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._aggregate = aggregate
        self._artifact: UUID | None = None
        self._running = RunMetrics()
        self._interval = interval
        self._clock = clock
        self._written_at = -math.inf  # the first chunk is written at once: a follower sees it live
        self._unwritten = False
        if aggregate.chunks > 1:
            created = create_progress_artifact(
                progress=0.0, description=f"Scoring {aggregate.cases} cases"
            )
            self._artifact = cast(UUID, created)  # sync call: returns the id, not a coroutine

    def chunk_done(self, chunk: int, metrics: RunMetrics) -> None:
        """Record one more finished chunk (its number, in finishing order), adding its counts to
        the running ones; written when the last write is `interval` old."""
        self._running.merge(metrics)
        aggregate = self._aggregate
        aggregate.chunks_done += 1
        aggregate.chunk_order.append(chunk)
        aggregate.metrics = self._running
        progress.report(aggregate.chunks_done, aggregate.chunks)
        self._unwritten = True
        if self._clock() - self._written_at >= self._interval:
            self.flush()

    def flush(self) -> None:
        """Write the progress not written yet: the aggregate, then the artifact."""
        if not self._unwritten:
            return
        aggregate = self._aggregate
        update_aggregate(evidence_store(self._store), aggregate)
        if self._artifact is not None:
            update_progress_artifact(
                self._artifact, progress=100.0 * aggregate.chunks_done / aggregate.chunks
            )
        self._written_at = self._clock()
        self._unwritten = False
