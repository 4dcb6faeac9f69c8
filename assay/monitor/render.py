"""The monitor report as text: markdown for the artifact and the CLI's lines."""

from __future__ import annotations

from assay.monitor.figures import (
    Change,
    CostPerCompleted,
    Tokens,
    diff_text,
    states_text,
)
from assay.monitor.report import (
    ABSENCE_NOTE,
    NO_DATA_KIND,
    MonitorReport,
    SubjectHealth,
    silent,
)
from assay.monitor.tracks import SequenceReport, paired_text
from assay.rate import rate_text


def relative_text(value: float | None) -> str:
    """`+152%`, or `n/a`."""
    return "n/a" if value is None else f"{value:+.0%}"


def cost_text(cost: CostPerCompleted) -> str:
    """`$0.0123 ($0.37 / 30 completed)`; `≥` when some ended sessions reported no cost; the
    spend of sessions that have not ended, which is in neither figure, after a `+`."""
    spent = f"(${cost.total_usd:.2f} / {cost.completed} completed)"
    live = f"; + ${cost.not_ended_usd:.2f} in {cost.not_ended} not ended" if cost.not_ended else ""
    if cost.value is None:
        return f"n/a {spent}{live}"
    return f"{'≥ ' if cost.uncosted else ''}${cost.value:.4f} {spent}{live}"


def tokens_text(tokens: Tokens) -> str:
    """`median / p95 (n=…)`, or `n/a (n=0)`."""
    if tokens.median is None or tokens.p95 is None:
        return "n/a (n=0)"
    return f"{tokens.median:.0f} / {tokens.p95:.0f} (n={tokens.n})"


def no_signals_text(health: SubjectHealth) -> str:
    """`no signals in the window`, with how many of the subject's sessions fell outside it."""
    if not health.outside:
        return "no signals in the window"
    return f"no signals in the window ({health.outside} session(s) outside it and the previous one)"


def change_text(moved: Change) -> str:
    """The change against the previous window, in one short line."""
    return (
        f"failure {diff_text(moved.failure)}, completion {diff_text(moved.completion)}, "
        f"cost {relative_text(moved.cost_per_completed)}"
    )


def _status_text(health: SubjectHealth) -> str:
    status = health.status.replace("_", " ")
    return f"{status}: {no_signals_text(health)}" if health.status == "no_data" else status


def markdown_report(report: MonitorReport) -> str:
    """The report as a markdown artifact: one row per subject, counts beside every rate."""
    lines = [
        f"# Session monitor · {report.window} to {report.current.end:%Y-%m-%d %H:%M} UTC",
        "",
        f"**{ABSENCE_NOTE}**",
        "",
        "| subject | status | sessions | states | unknown | completion | failure | high/critical "
        "| cost / completed | tokens median / p95 | change (failure, completion, cost) |",
        "|---|---|---:|---|---:|---|---|---|---|---|---|",
    ]
    for h in report.subjects:
        lines.append(
            f"| {h.subject} | {_status_text(h)} | {h.sessions} | {states_text(h)} "
            f"| {h.unknown.sessions} "
            f"| {rate_text(h.completion.completed, h.completion.n)} "
            f"| {rate_text(h.failure.failed, h.failure.n)} "
            f"| {rate_text(h.high_severity.flagged, h.high_severity.n)} "
            f"| {cost_text(h.cost_per_completed)} | {tokens_text(h.tokens)} "
            f"| {change_text(h.change)} |"
        )
    r = report.records
    lines += [
        "",
        f"{r.lines} signal line(s), {r.sessions} session(s) ({r.superseded} superseded by a "
        f"later line): {r.current} in the window, {r.previous} in the previous window, "
        f"{r.outside} outside both, {r.undated} undated, {r.unattributed} without a subject.",
    ]
    alerts = [c for h in report.subjects for c in h.findings]
    if alerts:
        lines += ["", "**Thresholds crossed**"]
        lines += [f"- {h.subject}: {c.summary}" for h in report.subjects for c in h.findings]
    quiet = [h.subject for h in report.subjects if silent(h)]
    if quiet:
        lines += ["", f"**Nothing measurable from** {', '.join(quiet)} (`{NO_DATA_KIND}`)"]
    if report.sequences is not None:
        lines += ["", *sequence_markdown(report.sequences)]
    lines += ["", f"Report `{report.report_id}` · signals `{report.signals}`"]
    return "\n".join(lines)


def plan_text(sequences: SequenceReport) -> str:
    """The registered plan in one line."""
    registered = sequences.registered
    plan = registered.plan
    against = f"against `{plan.baseline}` on {plan.signal}" if plan.baseline else "no baseline"
    return (
        f"Confidence sequences since {plan.since:%Y-%m-%d %H:%M} UTC, {against}, margin "
        f"{plan.margin:.2f}, alpha {plan.alpha:g} over the plan's life (registered "
        f"{registered.registered_at:%Y-%m-%d %H:%M} UTC by `{registered.registered_by}`)"
    )


def _bounds(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"{lo:.3f} to {hi:.3f}"


def sequence_markdown(sequences: SequenceReport) -> list[str]:
    """Per subject: its state and the paired sequence, and each rate's sequence, per window."""
    lines = [f"**{plan_text(sequences)}**"]
    if sequences.rows_omitted:
        lines.append(f"({sequences.rows_omitted} earlier window end(s) not shown)")
    for subject in sequences.subjects:
        lines += ["", f"### {subject.subject}"]
        header = "| window end | " + " | ".join(f"{r.signal} (n, CS)" for r in subject.rates)
        paired = subject.paired
        if paired is not None:
            lines.append(
                f"State **{paired.state}** against `{paired.baseline}` on {paired.signal}"
                + (f" since {paired.declared_at:%Y-%m-%d %H:%M} UTC" if paired.declared_at else "")
            )
            header += f" | {paired.signal} − baseline | state"
        columns = len(subject.rates) + (3 if paired else 1)
        lines += ["", header + " |", "|" + "---|" * columns]
        for k, end in enumerate(row.end for row in subject.rates[0].rows):
            cells = [f"{end:%Y-%m-%d %H:%M}"]
            cells += [
                f"{r.rows[k].n}, {_bounds(r.rows[k].lo, r.rows[k].hi)}" for r in subject.rates
            ]
            if paired is not None:
                cells += [paired_text(paired.rows[k]), paired.rows[k].state]
            lines.append("| " + " | ".join(cells) + " |")
    return lines
