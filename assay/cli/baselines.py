"""`assay baseline pin|show|unpin`: which run later runs are compared with."""

from __future__ import annotations

from typing import Annotated

import typer

from assay.cli import _common as common
from assay.runs import baselines
from assay.subject import Subject

SuiteArgument = Annotated[str, typer.Argument(help="Suite name.")]
SubjectArgument = Annotated[str, typer.Argument(help="KIND:ID.")]
VariantOption = Annotated[str | None, typer.Option("--variant", help="Subject variant.")]

baseline_app = typer.Typer(help="Pin, show and unpin baselines.", no_args_is_help=True)
common.app.add_typer(baseline_app, name="baseline")


@baseline_app.command("pin")
def baseline_pin(
    run_id: Annotated[
        str,
        typer.Argument(
            help="A completed run (its id or a unique prefix) to compare later runs with.",
            callback=common.checked_run_id,
        ),
    ],
    store: common.StoreOption = None,
) -> None:
    """Pin a run as the baseline of its suite and subject (append-only record)."""
    record = common.guarded(lambda: baselines.pin(common.open_evidence(store), run_id))
    common.out.print(f"Pinned {record.run_id} as the baseline of {record.suite} · {record.subject}")


@baseline_app.command("show")
def baseline_show(
    suite: SuiteArgument,
    subject: SubjectArgument,
    variant: VariantOption = None,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Show the pinned baseline of a suite and subject."""
    who = _subject_with_variant(subject, variant)
    run_id = baselines.pinned(common.open_evidence(store), suite, who)
    if as_json:
        common.print_json({"suite": suite, "subject": str(who), "pinned": run_id})
    else:
        common.out.print(
            f"{suite} · {who}: " + (run_id or "no pinned baseline (automatic selection)")
        )


@baseline_app.command("unpin")
def baseline_unpin(
    suite: SuiteArgument,
    subject: SubjectArgument,
    variant: VariantOption = None,
    store: common.StoreOption = None,
) -> None:
    """Remove the pin (recorded as an unpin; automatic selection applies again)."""
    who = _subject_with_variant(subject, variant)
    baselines.unpin(common.open_evidence(store), suite, who)
    common.out.print(f"Unpinned the baseline of {suite} · {who}")


def _subject_with_variant(subject: str, variant: str | None) -> Subject:
    who = common.guarded(lambda: Subject.parse(subject))
    return who.model_copy(update={"variant": variant}) if variant else who
