"""`assay compare`: pairwise A/B judging with the order swapped."""

from __future__ import annotations

from typing import Annotated

import typer

from assay.cli import _common as common
from assay.rate import rate_text
from assay.suites import registry


@common.app.command("compare")
def compare_command(
    suite: Annotated[str, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")],
    outputs_a: Annotated[str, typer.Option("--a", help="Outputs of side A (JSONL file/folder).")],
    outputs_b: Annotated[str, typer.Option("--b", help="Outputs of side B.")],
    label_a: Annotated[str, typer.Option("--label-a", help="Name of side A.")] = "A",
    label_b: Annotated[str, typer.Option("--label-b", help="Name of side B.")] = "B",
    judge_block: common.JudgeBlockOption = None,
    fresh_judge: common.FreshJudgeOption = False,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Pairwise A/B: judge each shared case that has an llm_judge check twice, with the order
    swapped. Cases without an llm_judge check are not compared (the rubric is what is judged)."""
    from assay.pairwise.options import CompareOptions

    evidence = common.open_evidence(store)
    ref = common.resolve_suite_arg(evidence, suite, outputs_a, outputs_b)
    report = common.run_flow(
        "compare",
        (f"suite:{registry.parse_ref(ref)[0]}", "compare"),
        quiet=as_json,
        options=CompareOptions(
            suite=ref,
            outputs_a=outputs_a,
            outputs_b=outputs_b,
            label_a=label_a,
            label_b=label_b,
            store=evidence.uri,
            judge_block=judge_block,
            fresh_judge=fresh_judge,
        ),
    )
    if as_json:
        common.print_json(report.model_dump(mode="json"))
        return
    n = report.judged
    common.out.print(f"[bold]{report.suite}@{report.suite_version}[/bold] · {label_a} vs {label_b}")
    common.out.print(
        f"  {label_a} wins {report.wins_a}/{n} · {label_b} wins {report.wins_b}/{n} · "
        f"ties {report.ties}/{n} · inconsistent {report.inconsistent}/{n} · "
        f"unjudged {report.unjudged}/{report.cases_compared}",
        highlight=False,
    )
    common.out.print(f"  win rate {label_a} {rate_text(report.wins_a, n)}", highlight=False)
    common.out.print(f"  win rate {label_b} {rate_text(report.wins_b, n)}", highlight=False)
    consistency = report.position_consistency
    common.out.print(
        f"  position consistency {rate_text(consistency.consistent, consistency.judged)}",
        highlight=False,
    )
    if report.slices is not None:
        from assay.multiplicity import figure, summary

        common.out.print(f"  {summary(report.slices)}", highlight=False)
        for test in report.slices.surviving:
            common.out.print(
                f"    {test.id}: raw p {figure(test.raw_p)}, BH q {figure(test.bh_q)}",
                highlight=False,
            )
    for reason, count in report.unjudged_reasons.items():
        common.out.print(
            f"  [yellow]warning:[/yellow] {count} pair(s) unjudged: {reason}", highlight=False
        )
    common.out.print(
        f"  comparison [cyan]{report.comparison_id}[/cyan] · {report.calls} call(s), "
        f"{report.cache_hits} cache hit(s), ${report.cost_usd:.4f}",
        highlight=False,
    )
