"""`assay store save` and `assay budget set/show`: Prefect blocks from the terminal."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import typer
from rich import box
from rich.markup import escape
from rich.table import Column, Table

from assay.cli import _common as common
from assay.cli.costs import read_ledger
from assay.finops.budget import BUDGET_BLOCK_FIELDS, Budget, usd
from assay.finops.costs import budget_status

store_app = typer.Typer(help="Save evidence storage as a Prefect block.", no_args_is_help=True)
budget_app = typer.Typer(
    help="Save FinOps budgets as Prefect blocks and see what they have left.", no_args_is_help=True
)
common.app.add_typer(store_app, name="store")
common.app.add_typer(budget_app, name="budget")


@store_app.command("save")
def store_save(
    name: Annotated[str, typer.Argument(help="Block name (\\[a-z0-9-]).")],
    url: Annotated[str, typer.Option("--url", help="file://PATH or s3://BUCKET/PREFIX.")],
    endpoint_url: Annotated[
        str | None, typer.Option("--endpoint-url", help="S3-compatible endpoint URL.")
    ] = None,
    region: Annotated[str | None, typer.Option("--region", help="S3 region.")] = None,
    access_key_id: Annotated[
        str | None, typer.Option("--access-key-id", help="Access key id.")
    ] = None,
    secret_access_key: Annotated[
        str | None,
        typer.Option(
            "--secret-access-key",
            envvar="ASSAY_SECRET_ACCESS_KEY",
            help="Secret key (or set ASSAY_SECRET_ACCESS_KEY, keeping it out of shell history).",
        ),
    ] = None,
) -> None:
    """Save an EvidenceStorage block; flows use it with `storage_block=NAME`."""
    common.prefect_defaults()
    from pydantic import SecretStr

    from blocks import EvidenceStorage

    block = common.guarded(
        lambda: EvidenceStorage(
            url=url,
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=SecretStr(secret_access_key) if secret_access_key else None,
        )
    )
    common.guarded(lambda: block.save(common.block_name(name), overwrite=True))
    common.out.print(f"Saved evidence storage [bold]{name}[/bold] → {url}")


@budget_app.command("set")
def budget_set(
    name: Annotated[str, typer.Argument(help="Block name (\\[a-z0-9-]).")],
    limit_usd: Annotated[float, typer.Option("--limit-usd", help="Limit per period, USD.")],
    period: Annotated[str, typer.Option("--period", help="day, week or month.")] = "month",
    mode: Annotated[str, typer.Option("--mode", help="block, throttle or alert.")] = "block",
    scope: Annotated[str, typer.Option("--scope", help="*, suite:NAME or subject:KIND:ID.")] = "*",
) -> None:
    """Save a FinOpsBudget block, checked before every judge task."""
    common.prefect_defaults()
    from blocks import FinOpsBudget

    block = common.guarded(
        lambda: FinOpsBudget.model_validate(
            {"limit_usd": limit_usd, "period": period, "mode": mode, "scope": scope}
        )
    )
    # The block does not check the scope's form; the preflight does, and refuses all judge
    # spending when a saved budget is malformed, so reject it before it is saved.
    common.guarded(lambda: Budget(name=name, **block.model_dump(include=BUDGET_BLOCK_FIELDS)))
    common.guarded(lambda: block.save(common.block_name(name), overwrite=True))
    common.out.print(
        f"Saved budget [bold]{name}[/bold]: {limit_usd} USD per {period}, {mode}, {scope}"
    )


@budget_app.command("show")
def budget_show(json_output: common.JsonOption = False, store: common.StoreOption = None) -> None:
    """Every saved FinOpsBudget with its spend in the current period and what is left.

    Spend is read from the cost ledger in the evidence store (`--store`), for the budget's scope
    and its current UTC period. Budgets that cannot be read exit 2: the judge refuses to spend
    then, so this is never shown as "no budgets".
    """
    common.prefect_defaults()
    from prefect.settings import PREFECT_API_URL

    from blocks.finops_budget import read_budgets

    budgets = read_budgets()
    if budgets is None:
        api = PREFECT_API_URL.value() or "ephemeral local server"
        common.fail(
            f"budgets unreadable: the Prefect API ({api}) did not answer, or a saved "
            "FinOpsBudget block is malformed; judge spending is refused until this is fixed"
        )
    evidence = common.open_evidence(store)
    statuses = read_ledger(evidence, lambda: budget_status(evidence, budgets))
    if json_output:
        common.print_json([status.model_dump(mode="json") for status in statuses])
        return
    if not statuses:
        common.out.print("No budgets saved (judge spending is not limited).")
        return
    # Two-line cells and no outer edge keep the table within 80 columns.
    table = Table(
        Column("budget", no_wrap=True),
        "mode",
        "period (UTC)",
        "spent / limit",
        "used",
        "remaining",
        title=f"Budgets (spend from {evidence.uri})",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    for status in statuses:
        last_day = (status.period_end - timedelta(days=1)).date()
        remaining = usd(status.remaining_usd)
        table.add_row(
            f"{status.name}\n[dim]{escape(status.scope)}[/dim]",
            status.mode,
            f"{status.period}\nto {last_day}",
            f"{usd(status.spent_usd)}\n/ {usd(status.limit_usd)}",
            f"{status.used_pct:.1f}%",
            remaining if status.remaining_usd >= 0 else f"[red]{remaining}[/red]",
        )
    common.out.print(table)
