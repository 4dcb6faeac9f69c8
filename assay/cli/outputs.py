"""`assay outputs inspect`: what Assay reads from your records, before any verdict."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from assay.cli import _common as common

if TYPE_CHECKING:
    from assay.suites.suite import Suite

outputs_app = typer.Typer(
    help="Inspect what Assay reads from your records (no scoring, no storing, no Prefect).",
    no_args_is_help=True,
)
common.app.add_typer(outputs_app, name="outputs")


@outputs_app.command("inspect")
def outputs_inspect(
    outputs: Annotated[str, typer.Argument(help="Outputs file or folder, or s3://bucket/prefix/.")],
    suite: Annotated[
        str | None,
        typer.Option(
            "--suite",
            help="Suite file, or a published NAME[@VERSION]: also say which of its checks "
            "would be unavailable on these records, and why.",
        ),
    ] = None,
    outputs_format: common.OutputsFormatOption = "auto",
    case_attribute: common.CaseAttributeOption = "assay.case_id",
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Show the format of each file, and per case its turns, its tool calls by name and step,
    and what the record could show — the command to run when a verdict looks wrong. Prints no
    output text and no argument values."""
    from assay.runs.inspection import inspect_outputs

    reference = common.outputs_reference(outputs, outputs_format, case_attribute)
    loaded = None
    if suite is not None:
        loaded = common.guarded(lambda: _suite(suite, store))
    found = common.guarded(lambda: inspect_outputs(reference, loaded))
    if as_json:
        common.print_json(found.model_dump(mode="json"))
        return
    for file in found.files:
        common.out.print(f"[bold]{file.path}[/bold]: {file.format}, {file.cases} case(s)")
    table = Table("case", "read as", "turns", "tool calls by step", "could not show")
    for case in found.cases:
        steps: dict[int, list[str]] = {}
        for call in case.calls:
            steps.setdefault(call.step, []).append(call.tool + (" (failed)" if call.failed else ""))
        table.add_row(
            case.case_id + (f" #{case.trial}" if case.trial else ""),
            case.source + (f", {case.traces} traces by {case.joined_by}" if case.joined_by else ""),
            ", ".join(f"{n} {role}" for role, n in case.turns.items()) or "–",
            ", ".join(" + ".join(calls) for _, calls in sorted(steps.items())) or "none",
            "; ".join(f"{evidence}: {why}" for evidence, why in case.unseen.items()) or "–",
        )
    common.out.print(table)
    unavailable = [(case.case_id, why) for case in found.cases for why in case.unavailable]
    if loaded is not None:
        common.out.print(f"{len(unavailable)} check(s) would be unavailable")
        for case_id, why in unavailable:
            common.out.print(f"  {case_id}: {why}", highlight=False)
        if found.unknown_cases:
            common.out.print(f"records for cases the suite lacks: {len(found.unknown_cases)}")
        if found.missing_cases:
            common.out.print(f"suite cases with no record: {len(found.missing_cases)}")


def _suite(ref: str, store: str | None) -> Suite:
    from assay.suites.suite import load_suite

    if Path(ref).is_file():
        return load_suite(Path(ref))
    from assay.suites import registry

    return registry.resolve(common.open_evidence(store), ref)[1]
