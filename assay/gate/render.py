"""The gate decision as a markdown artifact (no output text)."""

from __future__ import annotations

from collections.abc import Callable

from assay.gate.decision import GateDecision


def markdown_decision(decision: GateDecision, run_link: Callable[[str], str] = str) -> str:
    """The gate decision as markdown: verdict, every rule, warnings (no output text);
    `run_link` renders the run id (the artifact links it to the run's Prefect UI page)."""
    icon = "✅ pass" if decision.verdict == "pass" else "❌ fail"
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
