"""`--plan` on `assay run` and `assay gate`: the run's cost plan (`assay.runs.cost_plan`) instead
of the run — no judge called, nothing written, exit 0.

A command-line switch, not a run option (`RunOptions`): it asks the edge a question about a run
instead of starting one, so it has no meaning to the flow, a deployment or a nightly job, which
a run option would reach by itself. The service asks it as `plan=true` on `POST /runs` and
`POST /gate`; through a service (`--server`, `$ASSAY_URL`, or the local one when it is up) the
plan is the service's, which judges and budgets its runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.table import Table

from assay.cli import _common as common
from assay.cli._run_flags import run_options
from assay.runs.options import RunOptions

if TYPE_CHECKING:
    from assay.outputs.reference import OutputsReference
    from assay.runs.cost_plan import CostPlan


def show_plan(
    model: type[RunOptions],
    suite: str,
    reference: OutputsReference,
    options: dict[str, Any],
    endpoint: common.Endpoint | None,
    as_json: bool,
) -> NoReturn:
    """Print the cost plan of the run these arguments would start (here, or the service's),
    then exit 0."""
    plan = None
    if endpoint is not None:
        from assay.cli import remote

        sent = remote.sendable(endpoint, model, options, reference)
        if sent is not None:
            plan = remote.plan(endpoint, suite, reference, sent, gate=model is not RunOptions)
    if plan is None:
        plan = _planned_here(run_options(model, **dict(options, suite=suite, outputs=reference)))
    if as_json:
        common.print_json(plan.model_dump(mode="json"))
    else:
        _print_plan(plan)
    raise typer.Exit(0)


def _planned_here(options: RunOptions) -> CostPlan:
    """The plan in this process: the judge and budgets a run launched here would have."""
    from assay.runs.cost_plan import plan_run

    evidence = common.open_evidence(options.store)
    common.prefect_defaults()  # the budgets (and a JudgeSettings block) live in Prefect
    from blocks.judge_settings import judge_setup

    setup = common.guarded(
        lambda: judge_setup(options.judge_block, options.fresh_judge, options.judge_repeats)
    )
    return common.guarded(lambda: plan_run(evidence, options, setup))


def _print_plan(plan: CostPlan) -> None:
    judge = plan.judge or f"none ({plan.not_judged or 'no llm_judge checks'})"
    common.out.print(
        f"cost plan: suite {plan.suite} · subject {plan.subject} · judge {judge}", highlight=False
    )
    common.out.print(
        f"  {plan.outputs} output(s), {plan.checks} judged check(s) × {plan.repeats} repeat(s) ×"
        f" {plan.jurors} juror(s); {plan.unavailable} unavailable (not asked)",
        highlight=False,
    )
    common.out.print(
        f"  judge calls [bold]{plan.calls}[/bold] · cache hits {plan.cache_hits} · tokens at most"
        f" {plan.tokens.input:,} in + {plan.tokens.output:,} out",
        highlight=False,
    )
    common.out.print(
        f"  cost at most [bold]${plan.cost_usd.sync:.4f}[/bold] sync · "
        f"${plan.cost_usd.batch:.4f} through the batch API",
        highlight=False,
    )
    if plan.budgets:
        table = Table("budget", "mode", "limit", "spent", "reserved", "headroom", "stops it")
        for budget in plan.budgets:
            table.add_row(
                budget.name,
                budget.mode,
                f"${budget.limit_usd:.4f}",
                "unreadable" if budget.spent_usd is None else f"${budget.spent_usd:.4f}",
                f"${budget.reserved_usd:.4f}",
                "unknown" if budget.headroom is None else f"${budget.headroom:.4f}",
                "[red]yes[/red]" if budget.blocked else "no",
            )
        common.out.print(table)
    verdict = "[red]BLOCKED[/red]" if plan.blocked else "[green]within budget[/green]"
    common.out.print(f"{verdict}" + (f" — {plan.reason}" if plan.reason else ""), highlight=False)
