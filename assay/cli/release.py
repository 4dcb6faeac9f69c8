"""`assay release`: five release signals per variant and the evidence gates, in a Prefect flow."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.cells import cell_len
from rich.table import Table
from rich.text import Text

from assay.cli import _common as common
from assay.release import (
    COLUMNS,
    ReleaseReport,
    load_contract,
    load_trials,
    report_key,
    row,
    stop_lines,
)
from assay.release.options import ReleaseOptions

LAYOUTS: tuple[tuple[bool, bool], ...] = ((False, False), (True, False), (True, True))
"""(wrap, short gate) of the one-row-per-variant table, tried in order until one fits."""


def _cells(cells: list[str], wrap: bool, short_gate: bool) -> list[str]:
    """One variant's cells as laid out: with `wrap`, each figure's parenthesised note goes on
    its own line (a break between figures, never inside one); with `short_gate`, the gate cell
    is PASS or FAIL, since the `stopped:` line below names the gate."""
    signals = [cell.replace(" (", "\n(") if wrap else cell for cell in cells[1:-1]]
    gate = cells[-1].split(" ", 1)[0] if short_gate else cells[-1]
    return [cells[0], *signals, gate]


def _width(headers: list[str], rows: list[list[str]]) -> int:
    """Terminal cells the table needs: the widest line of each column, padding and rules."""
    widths = [
        max(cell_len(line) for text in [header, *(r[i] for r in rows)] for line in text.split("\n"))
        for i, header in enumerate(headers)
    ]
    return sum(widths) + 3 * len(widths) + 1


def _signals_table(report: ReleaseReport) -> Table:
    """The seed's layout — one row per variant — when it fits the terminal, with headers on
    several lines and, if needed, notes wrapped and the gate cell shortened; else transposed
    (one row per signal, one column per variant), so no figure is ever cut or folded.

    Every cell is `Text`, never markup: variant names are user input (`v[/b]2`)."""
    rows = [row(variant, report.contract.interval_min_n) for variant in report.variants]
    title = "Release signals (five denominators, no composite score)"
    headers = [column.replace(" ", "\n").replace("/", "/\n") for column in COLUMNS]
    styles = ["green" if variant.gate.passed else "red" for variant in report.variants]
    for wrap, short_gate in LAYOUTS:
        laid_out = [_cells(cells, wrap, short_gate) for cells in rows]
        if _width(headers, laid_out) <= common.out.width:
            table = Table(title=title)
            for column, header in zip(COLUMNS, headers, strict=True):
                words = column in ("variant", "gate")
                table.add_column(header, justify="left" if words else "right", no_wrap=True)
            for cells, style in zip(laid_out, styles, strict=True):
                table.add_row(*map(Text, cells[:-1]), Text(cells[-1], style=style))
            return table
    table = Table(title=title)
    table.add_column("signal")
    for cells in rows:
        table.add_column(Text(cells[0]), justify="right")
    for index, column in enumerate(COLUMNS[1:-1], start=1):
        table.add_row(column, *(Text(cells[index]) for cells in rows))
    table.add_row(
        "gate", *(Text(cells[-1], style=s) for cells, s in zip(rows, styles, strict=True))
    )
    return table


def _print_report(report: ReleaseReport) -> None:
    common.out.print(_signals_table(report))
    for line in stop_lines(report):
        common.out.print(Text.assemble(("stopped:", "red"), " ", line), highlight=False)
    common.out.print(
        f"report [cyan]{report.report_id}[/cyan] · {report_key(report.report_id)}",
        highlight=False,
    )


@common.app.command("release")
def release_command(
    trials: Annotated[
        str, typer.Argument(help="Trials JSONL (path or s3:// URI), one trial per line.")
    ],
    contract: Annotated[
        str | None,
        typer.Option("--contract", help="Release contract YAML (default: built-in thresholds)."),
    ] = None,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Gate each variant on its release signals; exit 0 when all pass, 1 when any fails."""
    evidence = common.open_evidence(store)
    # Validate before launching: bad input exits 2 without leaving a failed run behind.
    common.guarded(lambda: (load_contract(contract), load_trials(trials)))
    options = ReleaseOptions(trials=trials, contract=contract, store=evidence.uri)
    report = common.run_flow("release", ("release",), quiet=as_json, options=options)
    if as_json:
        common.print_json(report.model_dump(mode="json"))
    else:
        _print_report(report)
    if not report.passed:
        raise typer.Exit(1)
