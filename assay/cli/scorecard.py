"""`assay scorecard`: pass rates per subject and suite, pooled and over time."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from assay.cli import _common as common
from assay.rate import rate_text
from assay.runs.scorecard import scorecard, to_csv, trend_text


@common.app.command("scorecard")
def scorecard_command(
    subject: Annotated[
        str | None, typer.Option("--subject", help="KIND:ID (all variants) or KIND:ID@VARIANT.")
    ] = None,
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite.")] = None,
    output_format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    last: Annotated[int, typer.Option("--last", help="Runs in the trend.", min=3)] = 10,
    store: common.StoreOption = None,
    server: common.ServerOption = None,
    local: common.LocalOption = False,
) -> None:
    """Per subject and suite: runs, latest and pooled pass rate with Wilson intervals, trend."""
    if output_format not in ("table", "csv", "json"):
        common.fail("--format must be table, csv or json")
    endpoint = common.service(server, store, local=local)
    if endpoint is not None:
        from assay.cli import remote

        rows = remote.scorecards(endpoint, subject, suite, last)
    else:
        rows = scorecard(common.open_evidence(store), subject, suite, last)
    if output_format == "json":
        common.print_json([row.model_dump(mode="json") for row in rows])
        return
    if output_format == "csv":
        sys.stdout.write(to_csv(rows))
        return
    table = common.table(
        "subject", "suite", "runs", "latest", "pooled", "mean score", "trend / run"
    )
    for row in rows:
        table.add_row(
            row.subject,
            row.suite,
            str(row.runs),
            rate_text(row.latest_passed, row.latest_scored),
            rate_text(row.pooled_passed, row.pooled_scored),
            "n/a" if row.mean_score is None else f"{row.mean_score:.3f}",
            trend_text(row),
        )
    common.out.print(table if rows else "No completed runs yet.")
