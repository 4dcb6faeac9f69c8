"""`assay costs`: what the judge has cost, from the cost ledger in the evidence store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar, get_args

import typer
from rich.table import Table

from assay.cli._common import (
    JsonOption,
    StoreOption,
    app,
    fail,
    guarded,
    open_evidence,
    out,
    print_json,
)
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
        fail(f"cost ledger unreadable in {evidence.uri} ({type(exc).__name__}): {exc}")


def _figures(totals: CostTotals) -> list[str]:
    return [
        str(totals.records),
        str(totals.calls),
        f"{totals.input_tokens:,}",
        f"{totals.output_tokens:,}",
        usd(totals.cost_usd),
    ]


@app.command("costs")
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
    json_output: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Judge spend from the cost ledger: calls, tokens and USD per group, and the total."""
    groupings: tuple[Grouping, ...] = get_args(Grouping)
    grouping = next((g for g in groupings if g == by), None)
    if grouping is None:
        fail(f"--by must be one of {', '.join(groupings)}")
    first, last = guarded(lambda: cost_range(since, until))
    evidence = open_evidence(store)
    report = read_ledger(evidence, lambda: cost_report(evidence, first, last, grouping))
    if json_output:
        print_json(report.model_dump(mode="json"))
        return
    span = f"{first} … {last} (UTC)"
    if not report.rows:
        out.print(f"No judge spend recorded {span}.")
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
    out.print(table)
