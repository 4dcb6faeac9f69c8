"""`assay outcome`: the six-dimension outcome score per subject, its band and governance action.

`assay.outcome` is imported inside the command: its models cost every other command (and
`assay --help`) about 50 ms to build, for nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from assay.cli import _common as common

if TYPE_CHECKING:
    from assay.outcome import OutcomeReport

_BAND_STYLE = {
    "Excellent": "green",
    "Good": "green",
    "Marginal": "yellow",
    "Poor": "red",
    "Failing": "bold red",
}


@common.app.command("outcome")
def outcome_command(
    records: Annotated[str, typer.Argument(help="Invocation records (JSONL file or folder).")],
    contract: Annotated[
        str | None, typer.Option("--contract", help="Outcome contract (YAML or JSON).")
    ] = None,
    judge_block: common.JudgeBlockOption = None,
    notification_block: Annotated[
        str | None,
        typer.Option(
            "--notification-block", help="Saved NotificationTarget block (Marginal and below)."
        ),
    ] = None,
    fresh_judge: common.FreshJudgeOption = False,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Score invocation records per subject: six dimensions, composite, band and action."""
    from assay.outcome import check_records, load_contract
    from assay.outcome.options import OutcomeOptions

    evidence = common.open_evidence(store)
    common.guarded(lambda: load_contract(contract))  # bad input fails before Prefect starts
    common.guarded(lambda: check_records(records))
    report = common.run_flow(
        "outcome",
        ("outcome",),
        quiet=as_json,
        options=OutcomeOptions(
            records=records,
            contract=contract,
            store=evidence.uri,
            judge_block=judge_block,
            notification_block=notification_block,
            fresh_judge=fresh_judge,
        ),
    )
    if as_json:
        common.print_json(
            {
                "report_id": report.report_id,
                "subjects": [subject.model_dump(mode="json") for subject in report.subjects],
            }
        )
        return
    _print_report(report)


def _score(value: float | None) -> str:
    return "unavailable" if value is None else f"{value:.3f}"


def _print_report(report: OutcomeReport) -> None:
    from assay.outcome import DIMENSIONS

    weights = report.settings.weights
    for subject in report.subjects:
        table = Table(title=f"{subject.subject} · {subject.invocations} invocation(s)")
        table.add_column("dimension")
        table.add_column("weight", justify="right")
        table.add_column("mean", justify="right")
        table.add_column("coverage", justify="right")
        for dimension in DIMENSIONS:
            score = subject.dimensions[dimension]
            table.add_row(
                dimension,
                f"{weights[dimension]:.2f}",
                _score(score.mean),
                f"{score.n}/{subject.invocations}",
            )
        common.out.print(table)
        composite = subject.composite
        missing = f" · missing {', '.join(composite.missing)}" if composite.missing else ""
        renormalised = " (weights renormalised over the dimensions present)" * (
            composite.status == "partial"
        )
        common.out.print(
            f"  composite {_score(composite.value)} · {composite.status}{missing}{renormalised}",
            highlight=False,
        )
        if subject.band is None:
            common.out.print(
                "  band: none (an incomplete composite claims no band)", highlight=False
            )
        else:
            style = _BAND_STYLE[subject.band]
            common.out.print(f"  band [{style}]{subject.band}[/{style}] → {subject.action}")
    for dimension, reasons in report.unavailable.items():
        listed = ", ".join(f"{reason}: {count}" for reason, count in reasons.items())
        count = sum(reasons.values())
        common.out.print(
            f"[yellow]warning:[/yellow] {dimension} unavailable for {count} record(s): {listed}",
            highlight=False,
        )
    common.out.print(
        f"report [cyan]{report.report_id}[/cyan] · {report.judge_calls} judge call(s), "
        f"{report.judge_cache_hits} cache hit(s), ${report.judge_cost_usd:.4f}",
        highlight=False,
    )
