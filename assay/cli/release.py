"""`assay release`: five release signals per variant and the evidence gates, in a Prefect flow."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from assay.cli._common import (
    JsonOption,
    StoreOption,
    app,
    guarded,
    open_evidence,
    out,
    prefect_defaults,
    print_json,
)
from assay.release import (
    COLUMNS,
    ReleaseReport,
    load_contract,
    load_trials,
    report_key,
    row,
    stop_lines,
)


def _print_report(report: ReleaseReport) -> None:
    table = Table(title="Release signals (five denominators, no composite score)")
    for column in COLUMNS:
        table.add_column(
            column,
            justify="left" if column in ("variant", "gate") else "right",
            overflow="fold",
        )
    for variant in report.variants:
        cells = row(variant, report.contract.interval_min_n)
        style = "green" if variant.gate.passed else "red"
        table.add_row(*cells[:-1], f"[{style}]{cells[-1]}[/{style}]")
    out.print(table)
    for line in stop_lines(report):
        out.print(f"[red]stopped:[/red] {line}", highlight=False)
    out.print(
        f"report [cyan]{report.report_id}[/cyan] · {report_key(report.report_id)}",
        highlight=False,
    )


@app.command("release")
def release_command(
    trials: Annotated[
        str, typer.Argument(help="Trials JSONL (path or s3:// URI), one trial per line.")
    ],
    contract: Annotated[
        str | None,
        typer.Option("--contract", help="Release contract YAML (default: built-in thresholds)."),
    ] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Gate each variant on its release signals; exit 0 when all pass, 1 when any fails."""
    evidence = open_evidence(store)
    # Validate before launching: bad input exits 2 without leaving a failed run behind.
    guarded(lambda: (load_contract(contract), load_trials(trials)))
    prefect_defaults()
    from prefect import tags

    from flows.release import release

    with tags("assay", "release"):
        report = guarded(lambda: release(trials=trials, contract=contract, store=evidence.uri))
    if as_json:
        print_json(report.model_dump(mode="json"))
    else:
        _print_report(report)
    if not report.passed:
        raise typer.Exit(1)
