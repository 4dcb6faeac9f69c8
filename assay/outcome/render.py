"""The outcome report as markdown: per subject, the six dimensions, composite, band and action."""

from __future__ import annotations

from assay.outcome.contract import DIMENSIONS
from assay.outcome.report import OutcomeReport


def _score_text(value: float | None) -> str:
    return "unavailable" if value is None else f"{value:.3f}"


def markdown_report(report: OutcomeReport) -> str:
    """The report as markdown: per subject, each dimension with its coverage, the composite,
    band and governance action; then what was unavailable and why, and the judge's spend."""
    weights = report.settings.weights
    lines = [
        f"# Outcome score · `{report.records}`",
        "",
        "| subject | "
        + " | ".join(f"{d} (w {weights[d]:.2f})" for d in DIMENSIONS)
        + " | composite | band | action |",
        "|---" * (len(DIMENSIONS) + 4) + "|",
    ]
    for outcome in report.subjects:
        cells = [
            f"{_score_text(outcome.dimensions[d].mean)} ({outcome.dimensions[d].n}/"
            f"{outcome.invocations})"
            for d in DIMENSIONS
        ]
        score = outcome.composite
        status = score.status + (f", missing {', '.join(score.missing)}" if score.missing else "")
        lines.append(
            f"| {outcome.subject} | "
            + " | ".join(cells)
            + f" | {_score_text(score.value)} ({status}) | {outcome.band or '—'} | "
            f"{outcome.action or '—'} |"
        )
    lines.append("")
    lines.append(
        "Coverage is records scored / invocations. An unavailable dimension is never a zero: "
        "an `incomplete` composite has no value and no band; a `partial` one renormalises the "
        "weights of the dimensions present (the contract allows it)."
    )
    if report.unavailable:
        lines += ["", "Unavailable (records):"]
        for dimension, reasons in report.unavailable.items():
            listed = ", ".join(f"{reason}: {count}" for reason, count in reasons.items())
            lines.append(f"- {dimension}: {listed}")
    judge = report.judge
    lines += [
        "",
        f"Judge: {f'{judge.model} · {judge.prompt_version}' if judge else 'none'} · "
        f"{report.judge_calls} call(s), {report.judge_cache_hits} cache hit(s), "
        f"${report.judge_cost_usd:.4f}",
        f"Embeddings: {report.embedding_model or 'none'} · report `{report.report_id}`",
    ]
    if report.budget is not None and not report.budget.allowed:
        lines.append(f"Budget: {report.budget.status} ({report.budget.reason})")
    return "\n".join(lines) + "\n"
