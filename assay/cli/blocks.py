"""`assay store save` and `assay budget set`: Prefect blocks from the terminal."""

from __future__ import annotations

from typing import Annotated

import typer

from assay.cli._common import (
    app,
    block_name,
    guarded,
    out,
    prefect_defaults,
)

store_app = typer.Typer(help="Save evidence storage as a Prefect block.", no_args_is_help=True)
budget_app = typer.Typer(help="Save FinOps budgets as Prefect blocks.", no_args_is_help=True)
app.add_typer(store_app, name="store")
app.add_typer(budget_app, name="budget")


@store_app.command("save")
def store_save(
    name: Annotated[str, typer.Argument(help="Block name ([a-z0-9-]).")],
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
    prefect_defaults()
    from pydantic import SecretStr

    from blocks import EvidenceStorage

    block = guarded(
        lambda: EvidenceStorage(
            url=url,
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=SecretStr(secret_access_key) if secret_access_key else None,
        )
    )
    guarded(lambda: block.save(block_name(name), overwrite=True))
    out.print(f"Saved evidence storage [bold]{name}[/bold] → {url}")


@budget_app.command("set")
def budget_set(
    name: Annotated[str, typer.Argument(help="Block name ([a-z0-9-]).")],
    limit_usd: Annotated[float, typer.Option("--limit-usd", help="Limit per period, USD.")],
    period: Annotated[str, typer.Option("--period", help="day, week or month.")] = "month",
    mode: Annotated[str, typer.Option("--mode", help="block, throttle or alert.")] = "block",
    scope: Annotated[str, typer.Option("--scope", help="*, suite:NAME or subject:KIND:ID.")] = "*",
) -> None:
    """Save a FinOpsBudget block, checked before every judge task."""
    prefect_defaults()
    from blocks import FinOpsBudget

    block = guarded(
        lambda: FinOpsBudget.model_validate(
            {"limit_usd": limit_usd, "period": period, "mode": mode, "scope": scope}
        )
    )
    guarded(lambda: block.save(block_name(name), overwrite=True))
    out.print(f"Saved budget [bold]{name}[/bold]: {limit_usd} USD per {period}, {mode}, {scope}")
