"""The report of one run (`assay report RUN_ID [--against BASELINE]`), from stored records only.

`RunView` gathers what the page shows — the EvalResult, each case's verdicts (ids, statuses,
scores, check labels: never output text), the suite's tags and query classes, the comparison,
the baseline's case verdicts and the judge's latest calibration report — and `run_page` renders
it. Figures that other parts of Assay add to the EvalResult later (`trials`,
`regression.minimum_detectable_drop`) are read from its JSON by name, so the page shows them once
they are recorded and shows nothing (never fails) before.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

from pydantic import BaseModel, ValidationError

from assay.calibration.report import CalibrationReport, reports
from assay.errors import NotFoundError
from assay.gate.decision import GateDecision, load_decision
from assay.gcpause import gc_paused
from assay.regression import CaseChange, Comparison, RegressionStatus, case_change
from assay.reports import calibration, charts, page
from assay.runs.comparison import case_verdicts, compare_with_baseline
from assay.runs.records import (
    CaseStatus,
    EvalResult,
    load_aggregate,
    load_result,
    read_chunk,
    read_statuses,
)
from assay.runs.render import check_kind_lines, regression_lines, suite_run_verdict, warnings
from assay.runs.scoring import CaseEvidence
from assay.scorers import Status
from assay.scorers.trajectory import TRAJECTORY_KINDS
from assay.store import EvidenceStore
from assay.suites import registry

MARKS = {Status.PASS: "✓", Status.FAIL: "✗", Status.ERROR: "!", Status.SKIPPED: "–"}
"""Each status has a mark as well as a colour, so no reading depends on colour."""


@dataclass(frozen=True)
class CaseInfo:
    """What the suite says about a case that a report may show: its tags and query class."""

    tags: tuple[str, ...] = ()
    query_class: str | None = None


NO_INFO = CaseInfo()
"""A case with neither tags nor a query class."""


class _KRate(BaseModel):
    rate: float
    lo: float | None = None
    hi: float | None = None
    method: str = ""


class Trials(BaseModel):
    """The EvalResult's `trials` figures, as far as a report reads them."""

    cases: int = 0
    trials: int = 0
    k_min: int | None = None
    k_max: int | None = None
    pass_rate: _KRate | None = None
    pass_at_k: dict[int, float] = {}
    pass_pow_k: dict[int, float] = {}
    flaky_cases: int = 0
    flaky: list[str] = []


def _field(record: BaseModel | None, name: str) -> Any:
    """A field a later version of the record may carry, read from its JSON (None without)."""
    return None if record is None else record.model_dump(mode="json").get(name)


def trials_of(result: EvalResult) -> Trials | None:
    """The run's trial figures, when it recorded any in a shape this page reads."""
    found = _field(result, "trials")
    if not found:
        return None
    try:
        return Trials.model_validate(found)
    except ValidationError:
        return None


MAX_CASE_ROWS = 2_000
"""Rows the case table holds: every case that did not pass or changed against the baseline
first, then passing ones, each in suite order. A 100,000-case page stays a few MB that a browser
opens at once, and building it keeps at most this many cases' evidence in memory; `assay runs
cases RUN_ID` and `GET /runs/{id}/cases` list every case."""


@dataclass
class RunView:
    """Everything the run page shows, read from the store."""

    result: EvalResult
    rows: list[CaseEvidence]
    """The case table's cases (at most `MAX_CASE_ROWS`, see there), in suite order."""
    cases: int
    """Every case (or trial) of the run, listed in the table or not."""
    info: Mapping[str, CaseInfo]
    tags: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per tag: cases passed, scored."""
    classes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per query class: cases passed, scored."""
    flipped: dict[CaseChange, list[str]] = field(default_factory=dict)
    """Case ids by their change against the baseline (empty without a baseline)."""
    comparison: Comparison | None = None
    baseline_verdicts: Mapping[str, bool] | None = None
    calibration: CalibrationReport | None = None
    gate: GateDecision | None = None
    """The gate's recorded decision, when the run went through the gate."""
    notes: list[str] = field(default_factory=list)

    @property
    def omitted(self) -> int:
        """Cases the table leaves out (passing and unchanged ones of a large run)."""
        return self.cases - len(self.rows)


def load_view(store: EvidenceStore, run_id: str, against: str | None = None) -> RunView:
    """Read a finished run, compared with `against` (default: its recorded baseline)."""
    result = load_result(store, run_id)
    _, golden = registry.resolve(store, f"{result.suite}@{result.suite_version}")
    # Only cases with something to show: the others read as `NO_INFO`.
    info = {
        case.id: CaseInfo(tuple(case.tags), case.query_class)
        for case in golden.cases
        if case.tags or case.query_class
    }
    comparison = result.regression
    if against is not None:
        # A stored RunMetrics leaves out its score sum (the EvalResult keeps the mean score).
        metrics = result.metrics.model_copy(
            update={"score_sum": (result.score or 0.0) * result.metrics.scored}
        )
        comparison = compare_with_baseline(
            store, load_aggregate(store, run_id), metrics, golden.regression_threshold, against
        )
    baseline = comparison.baseline_run if comparison is not None else None
    latest = reports(store, result.judge) if result.judge is not None else []
    view = RunView(
        result=result,
        rows=[],
        cases=0,
        info=info,
        comparison=comparison,
        baseline_verdicts=case_verdicts(store, baseline) if baseline else None,
        calibration=latest[-1] if latest else None,
        gate=_gate_decision(store, run_id),
    )
    with gc_paused():  # the records read are acyclic, and most are dropped at once
        _read_cases(view, store, run_id)
    return view


def _gate_decision(store: EvidenceStore, run_id: str) -> GateDecision | None:
    try:
        return load_decision(store, run_id)
    except NotFoundError:
        return None


def _read_cases(view: RunView, store: EvidenceStore, run_id: str) -> None:
    """The group pass rates, the changes against the baseline and the table's rows, in two
    passes over the evidence: every case's id and status first, then the whole evidence of the
    chunks that hold a row of the table (a 100,000-case run: 0.2 s and a few chunks, instead of
    1.2 s parsing every record)."""
    tags: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    classes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    notable: list[tuple[int, int]] = []
    passing: list[tuple[int, int]] = []
    for chunk in range(load_aggregate(store, run_id).chunks):
        statuses = read_statuses(store, run_id, chunk)
        view.cases += len(statuses)
        for position, case in enumerate(statuses):
            change = _change(view, case)
            if change in ("newly failing", "newly passing"):
                view.flipped.setdefault(change, []).append(case.case_id)
            info = view.info.get(case.case_id, NO_INFO)
            if info is not NO_INFO and case.status is not Status.SKIPPED:
                groups = [tags[tag] for tag in info.tags]
                if info.query_class:
                    groups.append(classes[info.query_class])
                for tally in groups:
                    tally[0] += case.status is Status.PASS
                    tally[1] += 1
            kept = passing if case.status is Status.PASS and change == "unchanged" else notable
            if len(kept) < MAX_CASE_ROWS:
                kept.append((chunk, position))
    listed = sorted(notable + passing[: max(MAX_CASE_ROWS - len(notable), 0)])
    for chunk, rows in groupby(listed, key=itemgetter(0)):
        cases = read_chunk(store, run_id, chunk).cases
        view.rows.extend(cases[position] for _, position in rows)
    view.tags = {k: (v[0], v[1]) for k, v in tags.items()}
    view.classes = {k: (v[0], v[1]) for k, v in classes.items()}


def _change(view: RunView, case: CaseEvidence | CaseStatus) -> CaseChange:
    """The case against the baseline (`unchanged` when there is none to compare with)."""
    if view.baseline_verdicts is None:
        return "unchanged"
    now = None if case.status is Status.SKIPPED else case.status is Status.PASS
    return case_change(view.baseline_verdicts.get(case.case_id), now)


def run_report(store: EvidenceStore, run_id: str, against: str | None = None) -> str:
    """The run's report page."""
    return run_page(load_view(store, run_id, against))


def _rate(passed: int, n: int) -> str:
    estimate = charts.Estimate.of("", passed, n)
    return "n/a (0 scored)" if estimate is None else estimate.text


MAX_FOREST_ROWS = 30
"""Rows a breakdown chart shows: the lowest pass rates, where a reader looks first."""


def _estimates(counts: Mapping[str, tuple[int, int]]) -> list[charts.Estimate]:
    """Lowest pass rate first (then the larger group), at most `MAX_FOREST_ROWS`."""
    rows = (charts.Estimate.of(name, passed, n) for name, (passed, n) in sorted(counts.items()))
    shown = sorted((row for row in rows if row is not None), key=lambda r: (r.rate, -r.hi))
    return shown[:MAX_FOREST_ROWS]


def _header(view: RunView) -> list[str]:
    result = view.result
    m = result.metrics
    verdict = suite_run_verdict(result)
    ok = verdict.name == "Passed"
    score = "n/a" if result.score is None else f"{result.score:.3f}"
    figures = [
        ("pass rate (n, 95% CI)", _rate(m.passed, m.scored)),
        ("coverage", f"{m.coverage_text()} (min {result.min_coverage:g})"),
        ("pass threshold", f"{result.pass_threshold:g}"),
        ("mean score", score),
        ("cases", f"{m.cases}: {m.passed} passed, {m.failed} failed, {m.skipped} skipped"),
        ("missing · errors", f"{m.missing} · {m.errors}"),
    ]
    trials = trials_of(result)
    if trials is not None and trials.pass_rate is not None:
        rate = trials.pass_rate
        interval = "" if rate.lo is None else f" ({rate.lo:.3f}–{rate.hi:.3f})"
        figures.append(("pass rate over trials", f"{rate.rate:.3f}{interval} {rate.method}"))
    return [
        f"<h1>{page.text(result.suite)}@{result.suite_version} · {page.text(result.subject)}</h1>",
        f'<p class="sub">run {page.text(result.run_id)} · {result.occurred_at:%Y-%m-%d %H:%M} '
        f"UTC · outputs {page.text(result.outputs)}</p>",
        f'<div class="verdict {"ok" if ok else "bad"}">{page.text(verdict.name)}: '
        f"{page.text(verdict.message, 400)}</div>",
        page.figures(figures),
        page.bullets(warnings(result)),
    ]


def _gate(view: RunView) -> str:
    decision = view.gate
    if decision is None:
        return ""
    verdict = decision.verdict.replace("_", " ")
    rows = [(rule.rule, "pass" if rule.passed else "FAIL", rule.detail) for rule in decision.rules]
    return page.section(
        f"Gate: {verdict}",
        page.table(["rule", "result", "detail"], rows),
        page.bullets(decision.warnings),
        page.note(
            f"Recorded {decision.decided_at:%Y-%m-%d %H:%M} UTC; an override changes only the "
            "effective verdict (`assay gate --check`)."
        ),
        anchor="gate",
    )


def _breakdown(view: RunView) -> str:
    result = view.result
    kinds = {k: (t.passed, t.scored) for k, t in result.metrics.checks_by_kind.items()}
    tags, classes = view.tags, view.classes
    threshold = result.pass_threshold
    svgs = [
        charts.forest(title, rows, reference)
        for title, rows, reference in (
            ("Pass rate per check kind (checks)", _estimates(kinds), None),
            ("Pass rate per query class (cases)", _estimates(classes), threshold),
            ("Pass rate per tag (cases)", _estimates(tags), threshold),
        )
        if rows
    ]
    capped = [
        name
        for name, counts in (("tags", tags), ("query classes", classes))
        if len(counts) > MAX_FOREST_ROWS
    ]
    return page.section(
        "Where the failures are",
        page.charts(svgs),
        page.note(
            "Points are pass rates, bars their 95% Wilson intervals, counts after each row; "
            "lowest first."
            + "".join(f" Only the {MAX_FOREST_ROWS} lowest {name} are drawn." for name in capped)
        ),
        anchor="breakdown",
    )


def _flip_table(comparison: Comparison) -> str:
    paired = comparison.paired
    if paired is None:
        return page.note("No paired analysis: the runs did not score the same cases.")
    interval = (
        "n/a"
        if paired.interval is None
        else (f"{paired.interval[0]:+.3f} to {paired.interval[1]:+.3f}")
    )
    return (
        '<table class="flips" aria-label="flip table"><thead><tr><th>baseline \\ current</th>'
        '<th class="num">current: pass</th><th class="num">current: fail</th></tr></thead><tbody>'
        f'<tr><th>baseline: pass</th><td class="num">{paired.both_pass}</td>'
        f'<td class="num">{paired.baseline_only}</td></tr>'
        f'<tr><th>baseline: fail</th><td class="num">{paired.candidate_only}</td>'
        f'<td class="num">{paired.both_fail}</td></tr></tbody></table>'
        + page.note(
            f"Exact McNemar p = {paired.mcnemar_p:.4f}; paired Newcombe 95% CI of the drop "
            f"(baseline − current): {interval}."
        )
    )


def _comparison(view: RunView) -> str:
    comparison = view.comparison
    if comparison is None or comparison.status is RegressionStatus.NO_BASELINE:
        return page.section(
            "Compared with a baseline", page.note("No baseline: nothing to compare with yet.")
        )
    assert comparison.baseline is not None
    b, c = comparison.baseline, comparison.candidate
    rows = [
        charts.Estimate.of(f"baseline {comparison.baseline_run or ''}"[:24], b.passed, b.scored),
        charts.Estimate.of("current", c.passed, c.scored),
    ]
    chart = charts.bars(
        "Baseline vs current pass rate", [r for r in rows if r is not None], "pass rate"
    )
    parts = [
        page.charts([chart]),
        page.bullets(regression_lines(comparison)),
        _flip_table(comparison),
    ]
    detectable = _field(comparison, "minimum_detectable_drop")
    if isinstance(detectable, int | float):
        parts.append(
            page.note(
                f"Minimum detectable drop at these sample sizes (80% power, 5% two-sided): "
                f"{detectable:.3f} (regression threshold {comparison.threshold:g})."
            )
        )
    flipped = view.flipped
    lists = [
        (name, flipped.get(name, []))
        for name in ("newly failing", "newly passing")
        if flipped.get(name)
    ]
    for name, ids in lists:
        parts.append(f"<h3>{page.text(name)} ({len(ids)})</h3>" + page.bullets(ids[:200]))
    status = comparison.status.value.replace("_", " ")
    return page.section(f"Compared with a baseline: {status}", *parts, anchor="comparison")


def _trials(view: RunView) -> str:
    trials = trials_of(view.result)
    if trials is None:
        return ""
    series = [
        (name, points)
        for name, points in (("pass@k", trials.pass_at_k), ("pass^k", trials.pass_pow_k))
        if points
    ]
    chart = charts.curves("pass@k and pass^k", series, "probability") if series else ""
    flaky = page.note(
        f"{trials.flaky_cases} flaky case(s) (passed some trials, failed others) of "
        f"{trials.cases}; {trials.trials} trials, k {trials.k_min}–{trials.k_max}."
    )
    return page.section(
        "Trials",
        page.charts([chart] if chart else []),
        flaky,
        page.bullets(trials.flaky),
        anchor="trials",
    )


def _trajectories(view: RunView) -> str:
    result = view.result
    lines = [line for line in check_kind_lines(result) if line.split(":", 1)[0] in TRAJECTORY_KINDS]
    if not lines:
        return ""
    flips = view.comparison.trajectories if view.comparison is not None else None
    if flips is not None:
        lines.append(
            f"against the baseline, over {flips.compared} case(s): {flips.newly_failing} newly "
            f"failing, {flips.newly_passing} newly passing"
        )
    return page.section("Trajectory checks", page.bullets(lines), anchor="trajectories")


def _judge(view: RunView) -> str:
    result = view.result
    m = result.metrics
    if result.judge is None and not m.judged_checks and result.budget is None:
        return ""
    parts: list[str] = []
    if result.judge is not None:
        parts.append(
            page.note(f"judge {result.judge.model} · prompt {result.judge.prompt_version}")
        )
    if view.calibration is not None:
        parts.append(calibration.summary(view.calibration))
    elif result.judge is not None:
        parts.append(page.note("Uncalibrated: no calibration report for this judge."))
    svgs = []
    naive = charts.Estimate.of("naive judge pass rate", m.judged_checks_passed, m.judged_checks)
    rows = [naive] if naive else []
    corrected = result.judge_corrected
    if corrected is not None:
        lo, hi = corrected.interval
        rows.append(
            charts.Estimate(
                "PPI++ corrected",
                corrected.estimate,
                lo,
                hi,
                f"{corrected.estimate:.3f} ({lo:.3f}–{hi:.3f}), {corrected.labelled} labelled",
            )
        )
    if rows:
        svgs.append(charts.forest("Judged checks: naive and corrected pass rate", rows))
    consistency = result.judge_consistency
    if consistency is not None:
        flip = charts.Estimate.of(
            "flip rate", consistency.checks - consistency.unanimous, consistency.checks
        )
        if flip is not None:
            svgs.append(
                charts.forest(f"Judge flip rate over {consistency.repeats} repeats", [flip])
            )
    spent = [("this run", m.judge_cost_usd)]
    budget = result.budget
    if budget is not None and budget.spent_usd is not None:
        spent.insert(0, (f"{budget.budget or 'period'} spent before", budget.spent_usd))
    svgs.append(
        charts.spend("Judge spend", spent, budget.limit_usd if budget is not None else None)
    )
    parts.append(page.charts(svgs))
    parts.append(
        page.note(
            f"{m.judge_calls} judge call(s), {m.judge_cache_hits} cache hit(s), "
            f"${m.judge_cost_usd:,.4f}"
            + ("" if budget is None else f"; budget: {budget.status} — {budget.reason}")
        )
    )
    return page.section("The judge", *parts, anchor="judge")


def _check_label(check: Any) -> str:
    """A check's mark and scorer label; why it did not pass is in the case's label column (a
    10,000-case page stays under 5 MB with one copy of it)."""
    return (
        f'<i class="{check.status.value}">{MARKS[check.status]} {page.text(check.scorer, 80)}</i>'
    )


def _options(ident: str, label: str, values: Iterable[str]) -> str:
    options = "".join(f'<option value="{page.text(v)}">{page.text(v)}</option>' for v in values)
    return (
        f'<label>{label} <select id="{ident}"><option value="">all</option>{options}'
        "</select></label>"
    )


def _case_table(view: RunView) -> str:
    compared = view.baseline_verdicts is not None
    kinds: set[str] = set()
    tags: set[str] = set()
    rows = []
    for case in view.rows:
        info = view.info.get(case.case_id, NO_INFO)
        groups = [*info.tags, *([f"class:{info.query_class}"] if info.query_class else [])]
        case_kinds = sorted({c.kind for c in case.checks if c.kind})
        kinds.update(case_kinds)
        tags.update(groups)
        score = "" if case.score is None else f"{case.score:.3f}"
        checks = "".join(_check_label(check) for check in case.checks)
        ident = page.text(case.case_id, 200)
        rows.append(
            f'<tr data-case-id="{ident}" data-s="{case.status.value}" '
            f'data-k="{page.text(" ".join(case_kinds), 400)}">'
            f"<td>{ident}</td>"
            f'<td class="{case.status.value}">{MARKS[case.status]} {case.status.value}</td>'
            f"<td>{score}</td><td>{page.text(' '.join(groups), 400)}</td>"
            f"<td>{checks}</td><td>{page.text(_change(view, case)) if compared else ''}</td>"
            f"<td>{page.text(case.label)}</td></tr>"
        )
    filters = (
        '<div class="filters">'
        + _options("f-status", "status", [s.value for s in Status])
        + _options("f-kind", "check kind", sorted(kinds))
        + _options("f-tag", "tag", sorted(tags))
        + '<label>case id <input id="f-search" type="search" placeholder="search"></label>'
        + '<span id="f-shown" class="note"></span></div>'
    )
    head = "".join(
        f"<th>{h}</th>"
        for h in ("case", "status", "score", "tags", "checks", "vs baseline", "label")
    )
    table = (
        f'<table id="cases"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
    if not view.omitted:
        return page.section(f"Cases ({len(rows)})", filters, table, anchor="every-case")
    listed = page.note(
        f"{len(rows):,} of {view.cases:,} cases listed, at most {MAX_CASE_ROWS:,}: first every "
        "case that did not pass or changed against the baseline, then passing ones. "
        f"`assay runs cases {view.result.run_id}` lists every case."
    )
    return page.section(
        f"Cases ({len(rows):,} of {view.cases:,})", listed, filters, table, anchor="every-case"
    )


def run_page(view: RunView) -> str:
    """The whole page of one run."""
    result = view.result
    body = [
        *_header(view),
        _gate(view),
        _breakdown(view),
        _comparison(view),
        _trials(view),
        _trajectories(view),
        _judge(view),
        _case_table(view),
    ]
    return page.document(f"{result.suite} · {result.subject} · {result.run_id}", body)
