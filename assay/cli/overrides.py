"""`assay override RUN_ID --reason …` and `assay audit`: governed overrides and their audit trail.

`assay override` exit codes: 0 granted; 1 refused (the reason on stderr; a principal's attempt is
audited all the same, an unknown token's is not); 2 usage or input errors, such as a reason over
`MAX_REASON` characters (nothing is audited).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from assay.cli import _common as common
from assay.cli.access import caller_token, refused
from assay.gate import overrides
from assay.gate.overrides import MIN_REASON


@common.app.command("override")
def override(
    run_id: Annotated[
        str,
        typer.Argument(
            help="The gate run (its id or a unique prefix) whose failure is a false alarm.",
            callback=common.checked_run_id,
        ),
    ],
    reason: Annotated[
        str,
        typer.Option(
            "--reason", help=f"Why, in at least {MIN_REASON} characters (kept in the audit)."
        ),
    ],
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Override a failed gate (admin tier, ASSAY_TOKEN): changes the effective verdict only.

    The recorded verdict and the EvalResult stay as they were; every attempt, granted or
    refused, appends an audit record (`assay audit`).
    """
    evidence = common.open_evidence(store)
    record = common.guarded(
        lambda: overrides.request_override(evidence, run_id, caller_token(), reason)
    )
    if as_json:
        common.print_json(record.model_dump(mode="json"))
    if record.refusal is not None:
        refused(f"{record.refusal} ({'attempt audited' if record.audited else 'nothing recorded'})")
    if not as_json:
        common.out.print(
            Text(
                f"Override granted: run {record.run_id} is effectively pass; its recorded verdict "
                f"stays {record.recorded_verdict}. Audited as {record.principal} ({record.tier})."
            )
        )


@common.app.command("audit")
def audit(
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Only this run's records (its id or a unique prefix).",
            callback=common.checked_run_id,
        ),
    ] = None,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """List audited override attempts, granted and refused, newest last."""
    evidence = common.open_evidence(store)
    named = run
    if named is not None:
        run = common.guarded(lambda: overrides.gate_run_id(evidence, named))
    records = common.guarded(lambda: overrides.audit_records(evidence, run))
    if as_json:
        common.print_json([record.model_dump(mode="json") for record in records])
        return
    if not records:
        common.out.print("No audit records" + (f" for run {run}." if run else "."))
        return
    table = common.table("at (UTC) · run", "principal", "verdict", "outcome · reason")
    for record in records:
        outcome = (
            Text("granted", "green")
            if record.refusal is None
            else Text.assemble(("refused", "red"), f" ({record.refusal})")
        )
        table.add_row(
            Text(f"{record.at:%Y-%m-%d %H:%M:%S}\n{record.run_id}"),
            Text(f"{record.principal}\n{record.tier or 'no tier'}"),
            f"{record.recorded_verdict or 'none'} → {record.effective_verdict or 'none'}",
            Text.assemble(outcome, "\n", record.reason),
        )
    common.out.print(table)
