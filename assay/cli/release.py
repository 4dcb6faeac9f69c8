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


def _signals_table(report: ReleaseReport) -> Table:
    """The seed's layout — one row per variant — when it fits the terminal, else transposed
    (one row per signal, one column per variant), so no figure is ever cut or folded."""
    rows = [row(variant, report.contract.interval_min_n) for variant in report.variants]
    title = "Release signals (five denominators, no composite score)"
    headers = [column.replace(" ", "\n").replace("/", "/\n") for column in COLUMNS]
    widths = [
        max(len(line) for text in [header, *(r[i] for r in rows)] for line in text.split("\n"))
        for i, header in enumerate(headers)
    ]
    styles = ["green" if variant.gate.passed else "red" for variant in report.variants]
    if sum(widths) + 3 * len(widths) + 1 <= out.width:  # cells, padding and rules
        table = Table(title=title)
        for column, header in zip(COLUMNS, headers, strict=True):
            words = column in ("variant", "gate")
            table.add_column(header, justify="left" if words else "right", no_wrap=True)
        for cells, style in zip(rows, styles, strict=True):
            table.add_row(*cells[:-1], f"[{style}]{cells[-1]}[/{style}]")
        return table
    table = Table(title=title)
    table.add_column("signal")
    for cells in rows:
        table.add_column(cells[0], justify="right")
    for index, column in enumerate(COLUMNS[1:-1], start=1):
        table.add_row(column, *(cells[index] for cells in rows))
    table.add_row(
        "gate", *(f"[{s}]{cells[-1]}[/{s}]" for cells, s in zip(rows, styles, strict=True))
    )
    return table


def _print_report(report: ReleaseReport) -> None:
    out.print(_signals_table(report))
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
