"""The release table in words: one row per variant, shared by the CLI and the flow's artifact.

Every rate is shown as numerator/denominator; from `interval_min_n` on, a Wilson 95% interval
is added (five trials are "0/5", not proof of a zero failure rate).
"""

from __future__ import annotations

import json

from assay.rate import rate_text
from assay.release.report import ReleaseReport, VariantReport
from assay.verdicts import FlowVerdict

COLUMNS: tuple[str, ...] = (
    "variant",
    "quality",
    "useful progress",
    "tool effects",
    "cost/run",
    "cost/verified",
    "false success",
    "unverified completions",
    "gate",
)


def counts(numerator: int, denominator: int, interval_min_n: int) -> str:
    """`14/14` below `interval_min_n`; the rate with its Wilson interval at or above it."""
    if denominator >= interval_min_n:
        return rate_text(numerator, denominator)
    return f"{numerator}/{denominator}"


def _usd(value: float) -> str:
    return f"${value:.2f}" if value == 0 or value >= 0.01 else f"${value:.4f}"


def _cost(value: float | None, variant: VariantReport, why_missing: str) -> str:
    cost = variant.cost
    if value is None:
        return f"n/a ({cost.missing} missing)" if cost.missing else f"n/a ({why_missing})"
    return _usd(value) + (f" ({cost.estimated} estimated)" if cost.estimated else "")


def row(variant: VariantReport, interval_min_n: int) -> list[str]:
    """The table cells of one variant, in `COLUMNS` order."""
    quality, effects, claimed = variant.quality, variant.tool_effects, variant.false_success.claimed
    mean = "n/a" if quality.mean is None else f"{quality.mean:.3f}"
    declined = f" ({effects.declined} declined)" if effects.declined else ""
    gate = variant.gate
    return [
        variant.variant,
        f"{mean} ({quality.graded}/{quality.completed})",
        counts(variant.progress.with_delta, variant.progress.active, interval_min_n),
        counts(effects.verified, effects.attempts, interval_min_n) + declined,
        _cost(variant.cost.per_run, variant, "no cost"),
        _cost(variant.cost.per_verified, variant, "0 verified"),
        counts(variant.false_success.count, claimed, interval_min_n),
        counts(variant.unverified_completions, claimed, interval_min_n),
        "PASS" if gate.passed else f"FAIL at {gate.stopped_at}",
    ]


def stop_lines(report: ReleaseReport) -> list[str]:
    """For each failing variant: the first gate that stopped it and its failing checks."""
    lines = []
    for variant in report.variants:
        gate = variant.gate
        if gate.passed:
            continue
        stopped = next(r for r in gate.results if r.gate == gate.stopped_at)
        failing = "; ".join(check.detail for check in stopped.checks if not check.passed)
        lines.append(f"{variant.variant} stopped at {gate.stopped_at}: {failing}")
    return lines


def _md(cell: str) -> str:
    return cell.replace("|", "\\|")


def markdown_report(report: ReleaseReport) -> str:
    """The report as a markdown artifact: the table, why variants stopped, every gate's result."""
    verdict = "✅ every variant passed" if report.passed else "❌ a variant did not pass"
    min_n = report.contract.interval_min_n
    lines = [
        "# Release signals",
        "",
        f"**{verdict}** — five signals per variant, kept separate; gates in order "
        "coverage → false_success → unknown_effects → floors → quality_cost.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|---|" + "---:|" * (len(COLUMNS) - 2) + "---|",
        *["| " + " | ".join(_md(c) for c in row(v, min_n)) + " |" for v in report.variants],
    ]
    stops = stop_lines(report)
    if stops:
        lines += ["", "**Stopped**", *[f"- {_md(line)}" for line in stops]]
    lines += ["", "**Every gate**"]
    for variant in report.variants:
        marks = ", ".join(f"{r.gate} {'✅' if r.passed else '❌'}" for r in variant.gate.results)
        lines.append(f"- {_md(variant.variant)}: {marks}")
    thresholds = report.contract.model_dump(mode="json").items()
    lines += [
        "",
        "Contract: " + ", ".join(f"{key} {json.dumps(value)}" for key, value in thresholds),
        "",
        f"Report `{report.report_id}` · trials `{report.source}` · "
        f"{report.created_at:%Y-%m-%d %H:%M} UTC",
    ]
    return "\n".join(lines)


def release_verdict(report: ReleaseReport) -> FlowVerdict:
    """Release: `Release ok`, or `Release blocked` with the first variant's stopping gate."""
    if report.passed:
        return FlowVerdict(
            name="Release ok", passed=True, message="every variant passed every gate"
        )
    return FlowVerdict(name="Release blocked", passed=False, message=stop_lines(report)[0])
