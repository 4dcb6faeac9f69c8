"""`assay suite publish|show|list`: versioned golden suites."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from assay.cli import _common as common
from assay.suites import registry
from assay.suites.suite import load_suite

suite_app = typer.Typer(
    help="Publish, show and list versioned golden suites.", no_args_is_help=True
)
common.app.add_typer(suite_app, name="suite")


@suite_app.command("publish")
def suite_publish(
    file: Annotated[Path, typer.Argument(help="Suite file (.yaml, .yml or .json).")],
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Publish a suite file as a new immutable version (identical content is a no-op)."""
    evidence = common.open_evidence(store)
    suite = common.guarded(lambda: load_suite(file))
    version, created = common.guarded(lambda: registry.publish(evidence, suite))
    if as_json:
        common.print_json(
            {**version.model_dump(mode="json", exclude={"case_hashes"}), "created": created}
        )
        return
    if created:
        common.out.print(
            f"Published [bold]{version.ref}[/bold] ({version.cases} cases, "
            f"{version.content_hash[:19]}…)"
        )
    else:
        common.out.print(f"Unchanged: identical to [bold]{version.ref}[/bold] — nothing published")


@suite_app.command("show")
def suite_show(
    ref: Annotated[str, typer.Argument(help="NAME or NAME@VERSION.")],
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Show a published suite version exactly as it was published."""
    evidence = common.open_evidence(store)
    version, suite = common.guarded(lambda: registry.resolve(evidence, ref))
    if as_json:
        common.print_json(suite.document())
        return
    common.out.print(f"[bold]{version.ref}[/bold] — {suite.description or 'no description'}")
    common.out.print(
        f"published {version.published_at:%Y-%m-%d %H:%M} UTC · {version.content_hash} · "
        f"pass threshold {suite.pass_threshold} · min coverage {suite.min_coverage} · "
        f"regression threshold {suite.regression_threshold}"
    )
    table = Table("case", "class", "scorers", show_lines=False)
    for case in suite.cases:
        labels = [spec.build().label for spec in suite.scorers_for(case)]
        suffix = " (defaults)" if not case.scorers else ""
        table.add_row(case.id, case.query_class or "", "; ".join(labels) + suffix)
    common.out.print(table)


@suite_app.command("list")
def suite_list(store: common.StoreOption = None, as_json: common.JsonOption = False) -> None:
    """List published suites with their latest version."""
    evidence = common.open_evidence(store)
    latest = [registry.latest_version(evidence, name) for name in registry.suite_names(evidence)]
    rows = [v for v in latest if v is not None]
    if as_json:
        common.print_json([v.model_dump(mode="json", exclude={"case_hashes"}) for v in rows])
        return
    table = common.table("suite", "latest", "cases", "published (UTC)", "content hash")
    for v in rows:
        table.add_row(
            v.suite,
            str(v.version),
            str(v.cases),
            f"{v.published_at:%Y-%m-%d %H:%M}",
            v.content_hash[:19] + "…",
        )
    common.out.print(table if rows else "No suites published yet.")


@suite_app.command("power")
def suite_power(
    ref: Annotated[str, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")],
    baseline_rate: Annotated[
        float,
        typer.Option(
            "--baseline-rate", min=0.0, max=1.0, help="The pass rate the baseline run reaches."
        ),
    ],
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """The smallest drop from the baseline's pass rate that a run of this suite can detect
    (two-sided 5% test, 80% power, a baseline run of the same size; Cohen's h)."""
    from assay.stats import minimum_detectable_drop

    if Path(ref).is_file():
        suite = common.guarded(lambda: load_suite(ref))
        name = suite.suite
    else:
        evidence = common.open_evidence(store)
        version, suite = common.guarded(lambda: registry.resolve(evidence, ref))
        name = version.ref
    cases = len(suite.cases)
    drop = minimum_detectable_drop(baseline_rate, cases, cases)
    assert drop is not None  # a suite has at least one case
    sees_a_drop = drop < baseline_rate  # else even a fall to 0 is too small an effect
    if as_json:
        common.print_json(
            {
                "suite": name,
                "cases": cases,
                "baseline_rate": baseline_rate,
                "minimum_detectable_drop": drop,
                "detects_any_drop": sees_a_drop,
                "regression_threshold": suite.regression_threshold,
            }
        )
        return
    if not sees_a_drop:
        common.out.print(
            f"{name}: {cases} cases, baseline pass rate {baseline_rate:g} — no drop can be"
            f" detected with 80% power (a two-sided 5% test): even a fall to 0 is too small an"
            f" effect for {cases} cases; add cases (or trials)",
            highlight=False,
        )
        return
    common.out.print(
        f"{name}: {cases} cases, baseline pass rate {baseline_rate:g} — the smallest drop a"
        f" two-sided 5% test detects with 80% power is {drop:.4f} (to"
        f" {baseline_rate - drop:.4f})",
        highlight=False,
    )
    if drop > suite.regression_threshold:
        common.out.print(
            f"  drops between the regression threshold {suite.regression_threshold:g} and"
            f" {drop:.4f} will mostly go undetected: add cases (or trials) to see them",
            highlight=False,
        )
