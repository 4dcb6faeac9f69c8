"""A suite's trend (`assay report --trend SUITE [--subject …] [--last N]`): per subject, the pass
rate of its last N completed runs with the 95% Wilson band, regressed runs marked; beneath, the
suite's scorecard rows (latest and pooled pass rates, the trend per run)."""

from __future__ import annotations

from collections import defaultdict

from assay.rate import rate_text
from assay.regression import RegressionStatus
from assay.reports import charts, page
from assay.runs.records import EvalResult, RunStatus, list_runs, load_result
from assay.runs.scorecard import DEFAULT_TREND_RUNS, scorecard, trend_text
from assay.store import EvidenceStore


def _matches(result: EvalResult, subject: str | None) -> bool:
    return subject is None or subject in (
        result.subject,
        f"{result.subject_kind}:{result.subject_id}",
    )


def trend_series(
    store: EvidenceStore, suite: str, subject: str | None = None, last: int = DEFAULT_TREND_RUNS
) -> dict[str, list[EvalResult]]:
    """Per subject (`KIND:ID[@VARIANT]`), its last `last` completed runs of `suite`, oldest
    first; `subject` as `assay scorecard` takes it (`KIND:ID` matches every variant)."""
    series: dict[str, list[EvalResult]] = defaultdict(list)
    for run in reversed(list_runs(store)):  # oldest first
        if run.status is not RunStatus.COMPLETED or run.suite != suite:
            continue
        result = load_result(store, run.run_id)
        if _matches(result, subject):
            series[result.subject].append(result)
    return {name: runs[-last:] for name, runs in sorted(series.items())}


def _points(results: list[EvalResult]) -> list[charts.TrendPoint]:
    points = []
    for number, result in enumerate(results, start=1):
        estimate = charts.Estimate.of(result.run_id, result.metrics.passed, result.metrics.scored)
        if estimate is None:
            continue
        regression = result.regression
        regressed = regression is not None and regression.status is RegressionStatus.REGRESSED
        points.append(charts.TrendPoint(number, estimate, regressed))
    return points


def trend_page(
    store: EvidenceStore, suite: str, subject: str | None = None, last: int = DEFAULT_TREND_RUNS
) -> str:
    """The whole trend page."""
    series = trend_series(store, suite, subject, last)
    plotted = [(name, points) for name, results in series.items() if (points := _points(results))]
    title = f"{suite}: pass rate over the last {last} runs"
    chart = charts.trend(title, plotted) if plotted else ""
    runs = [
        (
            name,
            str(number),
            result.run_id,
            f"{result.occurred_at:%Y-%m-%d %H:%M}",
            rate_text(result.metrics.passed, result.metrics.scored),
            "regressed"
            if result.regression is not None
            and result.regression.status is RegressionStatus.REGRESSED
            else "",
        )
        for name, results in series.items()
        for number, result in enumerate(results, start=1)
    ]
    rows = scorecard(store, subject, suite, max(last, 3))
    card = [
        (
            row.subject,
            str(row.runs),
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
            page.table(("subject", "#", "run", "finished (UTC)", "pass rate", "regression"), runs),
        ),
        page.section(
            "Scorecard",
            page.table(("subject", "runs", "latest", "pooled", "trend / run"), card, numeric=0),
        ),
    ]
    return page.document(f"Trend {suite}", body)
