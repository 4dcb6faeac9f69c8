"""`assay costs`: what the judge has cost, from the cost ledger in the evidence store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar, get_args

import typer
from rich.table import Table

from assay.cli import _common as common
from assay.finops.budget import usd
from assay.finops.costs import CostTotals, Grouping, cost_range, cost_report
from assay.store import EvidenceStore

T = TypeVar("T")


def read_ledger(evidence: EvidenceStore, action: Callable[[], T]) -> T:
    """Run a ledger read; a store error or a corrupt record exits 2 naming the store.

    Reported, never shown as zero spend: an unreadable ledger also refuses judge spending.
    """
    try:
        return action()
    except Exception as exc:  # any failure, of any kind: the figures are unavailable
        common.fail(f"cost ledger unreadable in {evidence.uri} ({type(exc).__name__}): {exc}")


def _figures(totals: CostTotals) -> list[str]:
    return [
        str(totals.records),
        str(totals.calls),
        f"{totals.input_tokens:,}",
        f"{totals.output_tokens:,}",
        usd(totals.cost_usd),
    ]


@common.app.command("costs")
def costs_command(
    since: Annotated[
        str | None,
        typer.Option("--since", help="First day, YYYY-MM-DD (UTC); default: 1st of this month."),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Last day, YYYY-MM-DD (UTC), inclusive; default: today."),
    ] = None,
    by: Annotated[str, typer.Option("--by", help="day, suite, subject or model.")] = "day",
    json_output: common.JsonOption = False,
    store: common.StoreOption = None,
) -> None:
    """Judge spend from the cost ledger: calls, tokens and USD per group, and the total."""
    groupings: tuple[Grouping, ...] = get_args(Grouping)
    grouping = next((g for g in groupings if g == by), None)
    if grouping is None:
        common.fail(f"--by must be one of {', '.join(groupings)}")
    first, last = common.guarded(lambda: cost_range(since, until))
    evidence = common.open_evidence(store)
    report = read_ledger(evidence, lambda: cost_report(evidence, first, last, grouping))
    if json_output:
        common.print_json(report.model_dump(mode="json"))
        return
    span = f"{first} … {last} (UTC)"
    if not report.rows:
        common.out.print(f"No judge spend recorded {span}.")
        return
    table = Table(
        grouping,
        "records",
        "calls",
        "input tokens",
        "output tokens",
        "USD",
        title=f"Judge spend {span}, by {grouping}",
    )
    for row in report.rows:
        table.add_row(row.key or "(none)", *_figures(row))
    table.add_section()
    table.add_row("total", *_figures(report.total), style="bold")
    common.out.print(table)
    unpriced = [row.key or "(none)" for row in report.rows if row.calls and not row.cost_usd]
    if unpriced:
        listed = ", ".join(unpriced[:5]) + (", …" if len(unpriced) > 5 else "")
        common.out.print(
            f"[yellow]warning:[/yellow] judge calls priced at $0 in {len(unpriced)} {grouping} "
            f"group(s) ({listed}): no price was set, so USD understates the spend. Set "
            "ASSAY_JUDGE_INPUT_PRICE and ASSAY_JUDGE_OUTPUT_PRICE (USD per million tokens) or "
            "the JudgeSettings block's prices.",
            highlight=False,
        )
