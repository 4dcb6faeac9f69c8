"""`assay access add|list|audit`: principals, their tiers and their tokens.

Exit codes: 0 done; 1 refused (the caller's `ASSAY_TOKEN` is not an admin's, or another first
admin won the bootstrap); 2 usage or input errors (bad name, existing name without `--rotate`, a
first principal that is not an admin). Every refused add with a valid name is audited
(`assay access audit`).
"""

from __future__ import annotations

import os
from typing import Annotated, Final, NoReturn

import typer
from rich.text import Text

from assay.cli import _common as common
from assay.gate import access
from assay.gate.access import AccessDeniedError, Tier

EXIT_REFUSED: Final = 1

access_app = typer.Typer(help="Principals, tiers and tokens.", no_args_is_help=True)
common.app.add_typer(access_app, name="access")


def caller_token() -> str | None:
    """The caller's token from `ASSAY_TOKEN` (surrounding whitespace from pasting ignored)."""
    token = os.environ.get("ASSAY_TOKEN", "").strip()
    return token or None


def refused(message: str) -> NoReturn:
    """Say why on stderr and exit 1: the request was understood and not allowed."""
    common.err.print(Text.assemble(("refused: ", "red"), message), highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_REFUSED)


@access_app.command("add")
def access_add(
    name: Annotated[str, typer.Argument(help="The principal's name (a person or a CI job).")],
    tier: Annotated[Tier, typer.Option("--tier", help="viewer < operator < admin.")],
    rotate: Annotated[
        bool,
        typer.Option("--rotate", help="Issue an existing principal a new token (and tier)."),
    ] = False,
    store: common.StoreOption = None,
) -> None:
    """Add a principal and print its new token once (only its hash is stored).

    The store's first principal must be an admin; after that, ASSAY_TOKEN must be an admin's.
    The token goes to stdout alone, so `TOKEN=$(assay access add …)` captures it.
    """
    evidence = common.open_evidence(store)

    def add() -> str:
        try:
            return access.add_principal(
                evidence, name, tier, by_token=caller_token(), rotate=rotate
            )
        except AccessDeniedError as exc:
            refused(str(exc))

    token = common.guarded(add)
    typer.echo(token)
    common.err.print(
        Text(
            f"{'Rotated' if rotate else 'Added'} {name} ({tier}). This token cannot be shown "
            "again: keep it as a secret and pass it as ASSAY_TOKEN."
        ),
        soft_wrap=True,
    )


@access_app.command("list")
def access_list(store: common.StoreOption = None, as_json: common.JsonOption = False) -> None:
    """List principals with their tiers (never tokens or hashes)."""
    found = common.guarded(lambda: access.principals(common.open_evidence(store)))
    if as_json:
        common.print_json([principal.model_dump(mode="json") for principal in found])
        return
    if not found:
        common.out.print(
            "No principals yet: add the first admin with `assay access add NAME --tier admin`."
        )
        return
    table = common.table("name", "tier", "since (UTC)", "added by")
    for principal in found:
        table.add_row(
            Text(principal.name),
            principal.tier.value,
            f"{principal.since:%Y-%m-%d %H:%M:%S}",
            Text(principal.added_by),
        )
    common.out.print(table)


@access_app.command("audit")
def access_audit(store: common.StoreOption = None, as_json: common.JsonOption = False) -> None:
    """List refused access changes (who tried, what, why), oldest first."""
    attempts = common.guarded(lambda: access.access_attempts(common.open_evidence(store)))
    if as_json:
        common.print_json([attempt.model_dump(mode="json") for attempt in attempts])
        return
    if not attempts:
        common.out.print("No refused access changes.")
        return
    table = common.table("at (UTC)", "caller", "action", "name", "tier", "refusal")
    for attempt in attempts:
        table.add_row(
            f"{attempt.at:%Y-%m-%d %H:%M:%S}",
            Text(attempt.caller),
            attempt.action,
            Text(attempt.name),
            attempt.tier.value,
            Text(attempt.refusal),
        )
    common.out.print(table)
