"""`assay findings`: the findings runs and reports recorded (`assay.findings`), newest first —
from the store, or through the Assay service when one is up (`$ASSAY_URL`, `--server`, or the
lasting local service), as `GET /findings` lists them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import typer
from rich.text import Text

from assay.cli import _common as common


@common.app.command("findings")
def findings_command(
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite's.")] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="KIND:ID (all variants) or KIND:ID@VARIANT.")
    ] = None,
    kind: Annotated[
        str | None, typer.Option("--kind", help="Only this kind (eval_regression, …).")
    ] = None,
    since: Annotated[
        str | None, typer.Option("--since", help="ISO date or time (UTC if no zone).")
    ] = None,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
    local: common.LocalOption = False,
) -> None:
    """List recorded findings (regressions, blocked budgets, uncalibrated judges, …), newest
    first — through the Assay service when one is up."""
    try:
        after = None if since is None else datetime.fromisoformat(since)
    except ValueError:
        common.fail(f"--since {since}: not an ISO date or time")
    endpoint = common.service(server, store, local=local)
    if endpoint is not None:
        from assay.cli import remote

        found = remote.findings(endpoint, suite, subject, kind, since)
    else:
        from assay.findings import matching_findings

        evidence = common.open_evidence(store)
        found = common.guarded(lambda: matching_findings(evidence, suite, subject, kind, after))
        found.sort(key=lambda finding: finding.occurred_at, reverse=True)
    if as_json:
        common.print_json([finding.model_dump(mode="json") for finding in found])
        return
    if not found:
        common.out.print("No findings recorded.")
        return
    table = common.table("at (UTC)", "kind", "run", "subject", "summary")
    for finding in found:
        table.add_row(
            f"{finding.occurred_at:%Y-%m-%d %H:%M}",
            finding.kind,
            finding.run_id,
            Text(finding.subject),
            Text(finding.summary),
        )
    common.out.print(table)
