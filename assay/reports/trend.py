"""A suite's trend (`assay report --trend SUITE [--subject …] [--last N]`): per subject, the pass
rate of its last N completed runs with the 95% Wilson band, regressed runs marked; beneath, the
suite's scorecard rows (latest and pooled pass rates, the trend per run)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from assay.rate import rate_text
from assay.regression import RegressionStatus
from assay.reports import charts, page
from assay.runs.records import EvalResult
from assay.runs.scorecard import (
    DEFAULT_TREND_RUNS,
    Scored,
    completed_runs,
    of_subject,
    once_per_outputs,
    scorecard,
    trend_text,
)
from assay.store import EvidenceStore


@dataclass(frozen=True)
class TrendRun:
    """One run of a trend: its place among every run the page shows (1: the oldest), the
    result, and the earlier runs of the same outputs it re-scored (left out of the trend)."""

    number: int
    result: EvalResult
    rescored: tuple[str, ...] = ()


def trend_series(
    store: EvidenceStore, suite: str, subject: str | None = None, last: int = DEFAULT_TREND_RUNS
) -> dict[str, list[TrendRun]]:
    """Per subject (`KIND:ID[@VARIANT]`), its last `last` completed runs of `suite`, oldest
    first, one per set of outputs (`once_per_outputs`: the latest scoring of the same outputs);
    `subject` as `assay scorecard` takes it (`KIND:ID` matches every variant). The runs are
    numbered in one order over every subject (by when they finished), so that each subject's
    points have their own places on one axis."""
    grouped: dict[str, list[Scored]] = defaultdict(list)
    for run in completed_runs(store, suite):
        if of_subject(run.result, subject):
            grouped[run.result.subject].append(run)
    kept: dict[str, list[EvalResult]] = {}
    rescored: dict[str, list[str]] = defaultdict(list)
    for name, runs in grouped.items():
        results, superseded = once_per_outputs(runs)
        kept[name] = results[-last:]
        for earlier, latest in superseded.items():
            rescored[latest].append(earlier)
    order = sorted((r.occurred_at, r.run_id) for results in kept.values() for r in results)
    number = {run_id: place for place, (_, run_id) in enumerate(order, start=1)}
    return {
        name: [TrendRun(number[r.run_id], r, tuple(rescored[r.run_id])) for r in results]
        for name, results in sorted(kept.items())
    }


def _regressed(result: EvalResult) -> bool:
    regression = result.regression
    return regression is not None and regression.status is RegressionStatus.REGRESSED


def _points(runs: list[TrendRun]) -> list[charts.TrendPoint]:
    points = []
    for run in runs:
        metrics = run.result.metrics
        estimate = charts.Estimate.of(run.result.run_id, metrics.passed, metrics.scored)
        if estimate is not None:
            points.append(charts.TrendPoint(run.number, estimate, _regressed(run.result)))
    return points


def trend_page(
    store: EvidenceStore, suite: str, subject: str | None = None, last: int = DEFAULT_TREND_RUNS
) -> str:
    """The whole trend page."""
    series = trend_series(store, suite, subject, last)
    plotted = [(name, points) for name, results in series.items() if (points := _points(results))]
    title = f"{suite}: pass rate over the last {last} runs"
    chart = charts.trend(title, plotted) if plotted else ""
    runs = sorted(
        (
            (
                str(run.number),
                name,
                run.result.run_id,
                f"{run.result.occurred_at:%Y-%m-%d %H:%M}",
                rate_text(run.result.metrics.passed, run.result.metrics.scored),
                "regressed" if _regressed(run.result) else "",
                "re-scoring of the outputs of " + ", ".join(run.rescored) if run.rescored else "",
            )
            for name, shown in series.items()
            for run in shown
        ),
        key=lambda row: int(row[0]),
    )
    rows = scorecard(store, subject, suite, max(last, 3))
    card = [
        (
            row.subject,
            str(row.runs),
            str(row.rescored),
            rate_text(row.latest_passed, row.latest_scored),
            rate_text(row.pooled_passed, row.pooled_scored),
            trend_text(row),
        )
        for row in rows
    ]
    body = [
        f"<h1>Trend · {page.text(suite)}</h1>",
        f'<p class="sub">{page.text(subject or "every subject")} · last {last} completed runs '
        "per subject</p>",
        page.charts([chart]) if chart else page.note("No completed runs of this suite yet."),
        page.section(
            "Runs",
            page.table(
                ("#", "subject", "run", "finished (UTC)", "pass rate", "regression", "outputs"),
                runs,
            ),
            page.note(
                "Runs are numbered in one order over every subject, as the chart's axis. A set "
                "of outputs scored again (the same outputs digest) counts once, its latest "
                "scoring; the earlier ones are named beside it and left out of the chart and "
                "the scorecard."
            ),
        ),
        page.section(
            "Scorecard",
            page.table(
                ("subject", "runs", "re-scorings left out", "latest", "pooled", "trend / run"),
                card,
                numeric=0,
            ),
        ),
    ]
    return page.document(f"Trend {suite}", body)
