"""Scorecards: per subject and suite, how runs have gone over time (SPEC §7)."""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Iterator, Sequence
from statistics import fmean
from typing import Final, NamedTuple

from pydantic import BaseModel

from assay.rate import rate_text
from assay.runs.records import EvalResult, RunStatus, list_runs, load_result
from assay.runs.render import trial_lines
from assay.stats import trend, wilson
from assay.store import EvidenceStore

DEFAULT_TREND_RUNS = 10


class ScorecardRow(BaseModel):
    """One subject × suite line of a scorecard."""

    subject: str
    suite: str
    runs: int
    latest_run: str
    latest_pass_rate: float | None
    latest_passed: int
    latest_scored: int
    latest_lo: float | None
    latest_hi: float | None
    mean_pass_rate: float | None
    """Unweighted mean of the runs' pass rates."""
    pooled_passed: int
    pooled_scored: int
    pooled_lo: float | None
    pooled_hi: float | None
    """Wilson 95% interval of all runs' passes over all their scored cases."""
    mean_score: float | None
    trend_runs: int
    trend_slope: float | None
    """Change in pass rate per run over the last `trend_runs` runs; None: too few runs (< 3)."""
    trend_lo: float | None
    trend_hi: float | None
    latest_checks: str = ""
    """Per check kind of the latest run, passed/scored with the 95% Wilson interval:
    `tool_errors 1/2 (0.095–0.905); trajectory 3/3 (0.439–1.000)`."""
    latest_trials: str = ""
    """The latest run's trial and cluster figures (`assay.runs.render.trial_lines`), if any."""
    latest_conversations: str = ""
    """The latest run's conversation counts (`conversations_text`), if it scored any."""
    rescored: int = 0
    """Runs left out of `runs` and every figure: re-scorings of outputs a later run scored again
    (the same `outputs_digest`), so that one set of outputs counts once."""


def checks_text(result: EvalResult) -> str:
    """Each check kind's passed/scored with its Wilson interval, in kind order."""
    parts = []
    for kind, tally in sorted(result.metrics.checks_by_kind.items()):
        interval = wilson(tally.passed, tally.scored)
        shown = f" ({interval.lo:.3f}–{interval.hi:.3f})" if interval else ""
        parts.append(f"{kind} {tally.passed}/{tally.scored}{shown}")
    return "; ".join(parts)


TURN_INDEXES_SHOWN: Final = 10
"""Turn indexes `conversations_text` counts one by one before it says how many more there are."""


def conversations_text(result: EvalResult) -> str:
    """`conversations 4/6 passed; turns 15/18 (turn 1 6/6, turn 2 4/6, turn 3 5/6)` — the
    conversations (the run's cases), their scored turns, and each turn index's passed/scored,
    the first `TURN_INDEXES_SHOWN` of them; "" for a run without conversations."""
    m = result.metrics
    if m.turns is None:
        return ""
    indexes = m.turns.by_turn()
    shown = ", ".join(f"turn {index} {c}/{n}" for index, n, c, _ in indexes[:TURN_INDEXES_SHOWN])
    more = len(indexes) - TURN_INDEXES_SHOWN
    scored = sum(n for _, n, _, _ in indexes)
    passed = sum(c for _, _, c, _ in indexes)
    return (
        f"conversations {m.passed}/{m.scored} passed; turns {passed}/{scored} ({shown}"
        + (f", … {more} more" if more > 0 else "")
        + ")"
    )


class Scored(NamedTuple):
    """A completed run's result and the digest of the outputs it scored (None on older records)."""

    outputs_digest: str | None
    result: EvalResult


def once_per_outputs(runs: Sequence[Scored]) -> tuple[list[EvalResult], dict[str, str]]:
    """Runs (oldest first) with one per set of outputs: of the runs that scored the same outputs
    (the same `outputs_digest`), the latest — a re-scoring with a new suite version or judge
    supersedes the scoring before it. Also each superseded run's id → the id of the latest run
    of its outputs."""
    latest: dict[str, str] = {}
    for run in runs:
        if run.outputs_digest is not None:
            latest[run.outputs_digest] = run.result.run_id
    kept = [
        run.result
        for run in runs
        if run.outputs_digest is None or latest[run.outputs_digest] == run.result.run_id
    ]
    superseded = {
        run.result.run_id: latest[run.outputs_digest]
        for run in runs
        if run.outputs_digest is not None and latest[run.outputs_digest] != run.result.run_id
    }
    return kept, superseded


def completed_runs(store: EvidenceStore, suite: str | None = None) -> Iterator[Scored]:
    """Every completed run (of `suite`), oldest first, with its outputs digest."""
    for run in reversed(list_runs(store)):  # oldest first
        if run.status is RunStatus.COMPLETED and (suite is None or run.suite == suite):
            yield Scored(run.outputs_digest, load_result(store, run.run_id))


def of_subject(result: EvalResult, subject: str | None) -> bool:
    """Whether a run is of `subject`: `KIND:ID` matches every variant, `KIND:ID@VARIANT` one."""
    return subject is None or subject in (
        result.subject,
        f"{result.subject_kind}:{result.subject_id}",
    )


def _row(subject: str, suite: str, runs: list[Scored], last: int) -> ScorecardRow:
    results, superseded = once_per_outputs(runs)
    latest = results[-1]
    rates = [r.pass_rate for r in results if r.pass_rate is not None]
    scores = [r.score for r in results if r.score is not None]
    passed = sum(r.metrics.passed for r in results)
    scored = sum(r.metrics.scored for r in results)
    latest_ci = wilson(latest.metrics.passed, latest.metrics.scored)
    pooled_ci = wilson(passed, scored)
    recent = rates[-last:]
    slope = trend(recent)
    return ScorecardRow(
        subject=subject,
        suite=suite,
        runs=len(results),
        latest_run=latest.run_id,
        latest_pass_rate=latest.pass_rate,
        latest_passed=latest.metrics.passed,
        latest_scored=latest.metrics.scored,
        latest_lo=latest_ci.lo if latest_ci else None,
        latest_hi=latest_ci.hi if latest_ci else None,
        mean_pass_rate=fmean(rates) if rates else None,
        pooled_passed=passed,
        pooled_scored=scored,
        pooled_lo=pooled_ci.lo if pooled_ci else None,
        pooled_hi=pooled_ci.hi if pooled_ci else None,
        mean_score=fmean(scores) if scores else None,
        trend_runs=len(recent),
        trend_slope=slope.slope,
        trend_lo=slope.lo,
        trend_hi=slope.hi,
        latest_checks=checks_text(latest),
        latest_trials="; ".join(trial_lines(latest)),
        latest_conversations=conversations_text(latest),
        rescored=len(superseded),
    )


def scorecard(
    store: EvidenceStore,
    subject: str | None = None,
    suite: str | None = None,
    last: int = DEFAULT_TREND_RUNS,
) -> list[ScorecardRow]:
    """Scorecard rows for every subject × suite with completed runs (optionally filtered).

    `subject` matches `KIND:ID` (all variants) or `KIND:ID@VARIANT` exactly. A set of outputs
    scored several times counts once, its latest scoring (`once_per_outputs`).
    """
    groups: dict[tuple[str, str], list[Scored]] = defaultdict(list)
    for run in completed_runs(store, suite):
        if of_subject(run.result, subject):
            groups[(run.result.subject, run.result.suite)].append(run)
    return [
        _row(name, suite_name, runs, last) for (name, suite_name), runs in sorted(groups.items())
    ]


def trend_text(row: ScorecardRow) -> str:
    """`+0.012 (-0.004…+0.028)` per run, or why there is none."""
    if row.trend_slope is None:
        return "too few runs"
    return f"{row.trend_slope:+.3f} ({row.trend_lo:+.3f}…{row.trend_hi:+.3f})"


def readable(row: ScorecardRow) -> dict[str, str | int]:
    """The figures a person reads first (the JSON and CSV exports keep every one)."""
    return {
        "subject": row.subject,
        "suite": row.suite,
        "runs": row.runs,
        "latest pass rate": rate_text(row.latest_passed, row.latest_scored),
        "trend / run": trend_text(row),
    }


def to_csv(rows: list[ScorecardRow]) -> str:
    """Scorecard as CSV (one header line, one line per row)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(ScorecardRow.model_fields), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(row.model_dump())
    return buffer.getvalue()
