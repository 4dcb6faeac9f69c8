"""The report page of one run (`assay report RUN_ID [--against BASELINE]`): `run_page` renders
the `RunView` that `assay.reports.run_view.load_view` read from the store; `run_report` does both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from assay.judge.reliability import jury_line
from assay.regression import Comparison, RegressionStatus
from assay.reports import admission, calibration, charts, page
from assay.reports.run_view import (
    MAX_CASE_ROWS,
    NO_INFO,
    RunView,
    later_field,
    load_view,
    trials_of,
)
from assay.runs.render import (
    check_kind_lines,
    conversation_lines,
    regression_lines,
    suite_run_verdict,
    warnings,
)
from assay.runs.scoring import CaseEvidence, CheckResult
from assay.scorers import Status
from assay.scorers.trajectory import TRAJECTORY_KINDS
from assay.store import EvidenceStore

MARKS = {Status.PASS: "✓", Status.FAIL: "✗", Status.ERROR: "!", Status.SKIPPED: "–"}
"""Each status has a mark as well as a colour, so no reading depends on colour."""


def run_report(
    store: EvidenceStore, run_id: str, against: str | None = None, *, cross_suite: bool = False
) -> str:
    """The run's report page (`load_view`'s comparison)."""
    return run_page(load_view(store, run_id, against, cross_suite=cross_suite))


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
    detectable = later_field(comparison, "minimum_detectable_drop")
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


def _conversations(view: RunView) -> str:
    """The conversation figures and the turn-index chart (docs/conversations.md)."""
    result = view.result
    turns = result.metrics.turns
    if turns is None:
        return ""
    rows = turns.by_turn()
    chart = charts.by_index("Pass rate by turn index", rows, "turn") if rows else ""
    return page.section(
        "Conversations",
        page.charts([chart] if chart else []),
        page.bullets(conversation_lines(result)),
        page.note(
            "The conversation is the case: the run's pass rate is over conversations. Turn j's "
            "point is its pass rate over the conversations scored at turn j, its bar the 95% "
            "interval (Wilson; with trials, cluster-robust over conversations); a turn after "
            "one the record lacks is not scored. The turn-level rate's interval is "
            "cluster-robust, conversations as the clusters."
        ),
        anchor="conversations",
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
    if result.judge_jury is not None:
        parts.append(page.note(jury_line(result.judge_jury, consistency)))
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


MAX_STRIP_TURNS = 50
"""Turn cells a conversation's strip holds; past them it says how many more."""


def _turn_strip(case: CaseEvidence) -> str:
    """One cell per turn: its number and status mark, coloured, its status and (when it did not
    pass) its label in the title; the extra turns the record held are counted after them."""
    turns = case.turns or []
    count = len(turns)
    cells = []
    for turn in turns[:MAX_STRIP_TURNS]:
        word = "missing" if turn.missing else turn.status.value
        why = "" if turn.status is Status.PASS else f": {turn.label}"
        title = page.text(f"turn {turn.turn} of {count}: {word}{why}", 200)
        missing = " missing" if turn.missing else ""
        cells.append(
            f'<b class="t {turn.status.value}{missing}" title="{title}">'
            f"{turn.turn}{MARKS[turn.status]}</b>"
        )
    notes = []
    if count > MAX_STRIP_TURNS:
        notes.append(f"+{count - MAX_STRIP_TURNS} more turns")
    extra = (case.record_turns or 0) - count
    if extra > 0:
        notes.append(f"+{extra} extra not scored")
    tail = f' <span class="note">{page.text(", ".join(notes))}</span>' if notes else ""
    return f'<span class="strip" aria-label="turns">{"".join(cells)}</span>{tail}'


def _options(ident: str, label: str, values: Iterable[str]) -> str:
    options = "".join(f'<option value="{page.text(v)}">{page.text(v)}</option>' for v in values)
    return (
        f'<label>{label} <select id="{ident}"><option value="">all</option>{options}'
        "</select></label>"
    )


def _trial_counts(trials: list[CaseEvidence]) -> tuple[int, int]:
    """(passed, scored) of a case's trials."""
    scored = [trial for trial in trials if trial.status is not Status.SKIPPED]
    return sum(trial.status is Status.PASS for trial in scored), len(scored)


def _trials_cell(view: RunView, case: CaseEvidence) -> str:
    """A case's trial counts (`2/3`), expanding to each trial's status, score, checks and
    label (a conversation's: its turn strip)."""
    trials = view.trials.get(case.case_id, [])
    passed, scored = _trial_counts(trials)
    items = []
    for trial in trials:
        score = "" if trial.score is None else f" {trial.score:.3f}"
        strip = f" {_turn_strip(trial)}" if trial.turns is not None else ""
        checks = "".join(_check_label(check) for check in trial.checks)
        items.append(
            f'<li data-trial="{trial.trial or 1}"><span class="{trial.status.value}">'
            f"#{trial.trial or 1} {MARKS[trial.status]} {trial.status.value}</span>{score}"
            f"{strip} {checks} {page.text(trial.label)}</li>"
        )
    return (
        f'<details><summary title="trials passed of scored">{passed}/{scored}</summary>'
        f"<ol>{''.join(items)}</ol></details>"
    )


def case_row_head(
    view: RunView,
    case: CaseEvidence,
    every_check: Sequence[CheckResult],
    kinds: set[str],
    tags: set[str],
) -> str:
    """A case row's opening and its first four cells (id, status, score, tags) — the hooks of
    the report's one script (`data-s`, `data-k`, the tags in the fourth cell) — adding the row's
    check kinds (`every_check`'s) and tags to `kinds` and `tags`."""
    info = view.info.get(case.case_id, NO_INFO)
    groups = [*info.tags, *([f"class:{info.query_class}"] if info.query_class else [])]
    case_kinds = sorted({c.kind for c in every_check if c.kind})
    kinds.update(case_kinds)
    tags.update(groups)
    score = "" if case.score is None else f"{case.score:.3f}"
    ident = page.text(case.case_id, 200)
    return (
        f'<tr data-case-id="{ident}" data-s="{case.status.value}" '
        f'data-k="{page.text(" ".join(case_kinds), 400)}">'
        f"<td>{ident}</td>"
        f'<td class="{case.status.value}">{MARKS[case.status]} {case.status.value}</td>'
        f"<td>{score}</td><td>{page.text(' '.join(groups), 400)}</td>"
    )


def case_filters(kinds: set[str], tags: set[str]) -> str:
    """The case table's filters (status, check kind, tag, search), read by the report's script."""
    return (
        '<div class="filters">'
        + _options("f-status", "status", [s.value for s in Status])
        + _options("f-kind", "check kind", sorted(kinds))
        + _options("f-tag", "tag", sorted(tags))
        + '<label>case id <input id="f-search" type="search" placeholder="search"></label>'
        + '<span id="f-shown" class="note"></span></div>'
    )


def _case_table(view: RunView) -> str:
    compared = view.baseline_verdicts is not None
    with_trials = view.policy is not None
    conversations = any(case.turns is not None for case in view.rows)
    kinds: set[str] = set()
    tags: set[str] = set()
    rows = []
    for case in view.rows:
        every_check = [
            check
            for evidence in (case, *view.trials.get(case.case_id, ()))
            for check in (
                *evidence.checks,
                *(c for turn in evidence.turns or () for c in turn.checks),
            )
        ]
        checks = "".join(_check_label(check) for check in case.checks)
        rows.append(
            case_row_head(view, case, every_check, kinds, tags)
            + (f"<td>{_trials_cell(view, case)}</td>" if with_trials else "")
            + (f"<td>{_turn_strip(case)}</td>" if conversations else "")
            + f"<td>{checks}</td><td>{page.text(view.change(case)) if compared else ''}</td>"
            f"<td>{page.text(case.label)}</td></tr>"
        )
    filters = case_filters(kinds, tags)
    columns = (
        "case",
        "status",
        "score",
        "tags",
        *(["trials"] if with_trials else []),
        *(["turns"] if conversations else []),
    )
    head = "".join(f"<th>{h}</th>" for h in (*columns, "checks", "vs baseline", "label"))
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
        _conversations(view),
        _trials(view),
        _trajectories(view),
        _judge(view),
        admission.section(view.admission),
        _case_table(view),
    ]
    return page.document(f"{result.suite} · {result.subject} · {result.run_id}", body)
