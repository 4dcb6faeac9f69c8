"""The pairwise report as a markdown artifact."""

from __future__ import annotations

from assay.multiplicity import markdown
from assay.pairwise.report import PairwiseReport


def _cell(text: str) -> str:
    """A label safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _interval(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"{lo:.3f}–{hi:.3f}"


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.3f}"


def markdown_report(report: PairwiseReport) -> str:
    """The comparison as a markdown artifact: outcomes with denominators, rates with intervals."""
    a, b = _cell(report.label_a), _cell(report.label_b)
    n = report.judged
    consistency = report.position_consistency
    lines = [
        f"# Pairwise comparison · {report.suite}@{report.suite_version} · {a} vs {b}",
        "",
        "Each shared case with an `llm_judge` rubric is judged twice, with the order swapped; "
        "a winner is declared only when both orders agree.",
        "",
        "| outcome | pairs | of judged pairs |",
        "|---|---:|---:|",
        f"| {a} wins | {report.wins_a} | {report.wins_a}/{n} |",
        f"| {b} wins | {report.wins_b} | {report.wins_b}/{n} |",
        f"| ties (both orders) | {report.ties} | {report.ties}/{n} |",
        f"| inconsistent (orders disagree; a tie) | {report.inconsistent} "
        f"| {report.inconsistent}/{n} |",
        f"| **judged** | **{n}** | of {report.cases_compared} compared |",
        f"| unjudged (excluded) | {report.unjudged} | of {report.cases_compared} compared |",
        "",
        "| rate | value | 95% CI (Wilson) | count |",
        "|---|---:|---:|---:|",
        f"| win rate {a} | {_rate(report.win_rate_a.rate)} "
        f"| {_interval(report.win_rate_a.lo, report.win_rate_a.hi)} "
        f"| {report.win_rate_a.wins}/{report.win_rate_a.n} |",
        f"| win rate {b} | {_rate(report.win_rate_b.rate)} "
        f"| {_interval(report.win_rate_b.lo, report.win_rate_b.hi)} "
        f"| {report.win_rate_b.wins}/{report.win_rate_b.n} |",
        f"| position consistency | {_rate(consistency.rate)} "
        f"| {_interval(consistency.lo, consistency.hi)} "
        f"| {consistency.consistent}/{consistency.judged} |",
        "",
        f"Judge `{report.judge.model or 'none'}` · prompt `{report.judge.prompt_version or 'n/a'}`"
        f" · {report.calls} call(s) · {report.cache_hits} cache hit(s) · "
        f"${report.cost_usd:.4f}",
    ]
    notes = []
    if report.unjudged:
        why = ", ".join(f"{reason}: {count}" for reason, count in report.unjudged_reasons.items())
        notes.append(f"{report.unjudged} pair(s) unjudged and excluded ({why})")
    if report.without_rubric:
        notes.append(f"{report.without_rubric} case(s) have no `llm_judge` rubric: not compared")
    if report.missing_a:
        notes.append(f"{report.missing_a} case(s) with a rubric have no output in {a}")
    if report.missing_b:
        notes.append(f"{report.missing_b} case(s) with a rubric have no output in {b}")
    if report.budget is not None and report.budget.status not in ("allowed", "no_budget"):
        notes.append(f"budget {report.budget.status}: {report.budget.reason}")
    if notes:
        lines += ["", "**Warnings**", *[f"- {note}" for note in notes]]
    if report.slices is not None:
        lines += ["", markdown(report.slices, (f"{a} wins", f"{b} wins"))]
    lines += [
        "",
        f"Comparison `{report.comparison_id}` · {report.occurred_at:%Y-%m-%d %H:%M} UTC",
    ]
    return "\n".join(lines)
