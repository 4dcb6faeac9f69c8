"""The gate decision as a markdown artifact (no output text)."""

from __future__ import annotations

from collections.abc import Callable

from assay.gate.decision import GateDecision
from assay.verdicts import FlowVerdict


def markdown_decision(decision: GateDecision, run_link: Callable[[str], str] = str) -> str:
    """The gate decision as markdown: verdict, every rule, warnings (no output text);
    `run_link` renders the run id (the artifact links it to the run's Prefect UI page)."""
    icon = {"pass": "✅ pass", "fail": "❌ fail"}.get(decision.verdict, "⚠️ insufficient evidence")
    lines = [
        f"# Gate · {decision.suite}@{decision.suite_version} · {decision.subject}",
        "",
        f"**{icon}** — run {run_link(decision.run_id)}",
        "",
        "| rule | result | detail |",
        "|---|---|---|",
        *[
            f"| {r.rule} | {'pass' if r.passed else '**fail**'} | {r.detail} |"
            for r in decision.rules
        ],
    ]
    if decision.warnings:
        lines += ["", "**Warnings**", *[f"- {note}" for note in decision.warnings]]
    return "\n".join(lines)


def gate_verdict(decision: GateDecision) -> FlowVerdict:
    """Gate: `Gate passed`, or `Gate failed` naming the first failing rule."""
    if decision.verdict == "pass":
        warned = f"; {len(decision.warnings)} warning(s)" if decision.warnings else ""
        return FlowVerdict(name="Gate passed", passed=True, message=f"every rule passed{warned}")
    first = decision.reasons[0]
    more = len(decision.reasons) - 1
    return FlowVerdict(
        name="Gate failed" if decision.verdict == "fail" else "Insufficient evidence",
        passed=False,
        message=f"{first.rule}: {first.message}" + (f" (+{more} more)" if more else ""),
    )
