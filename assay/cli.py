"""The `assay` command line (Typer + Rich).

Exit codes: 0 when the command did its job (a run completed, whatever its verdict); 2 on usage or
input errors, with one line naming file, line and field. The only module in `assay/` allowed to
import Prefect, and only inside the commands that launch flows (so `assay suite …` stays fast).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from assay import baselines, progress, registry
from assay.errors import AssayError, InputError, NotFoundError
from assay.report import rate_text, regression_lines, warnings
from assay.runs import EvalResult, Subject, list_runs, load_aggregate, load_result
from assay.scorecard import scorecard, to_csv
from assay.store import EvidenceStore, open_store
from assay.suites import load_suite

EXIT_USAGE = 2
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

app = typer.Typer(
    help="Assay: score agent outputs against versioned golden suites, with honest evidence.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
suite_app = typer.Typer(
    help="Publish, show and list versioned golden suites.", no_args_is_help=True
)
runs_app = typer.Typer(help="List and inspect recorded runs.", no_args_is_help=True)
app.add_typer(suite_app, name="suite")
baseline_app = typer.Typer(help="Pin, show and unpin baselines.", no_args_is_help=True)
app.add_typer(baseline_app, name="baseline")
store_app = typer.Typer(help="Save evidence storage as a Prefect block.", no_args_is_help=True)
budget_app = typer.Typer(help="Save FinOps budgets as Prefect blocks.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")
app.add_typer(store_app, name="store")
app.add_typer(budget_app, name="budget")

out = Console()
err = Console(stderr=True)

StoreOption = Annotated[
    str | None,
    typer.Option("--store", help="Evidence store URI (default: $ASSAY_STORE or file://.assay)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]

T = TypeVar("T")


def _fail(message: str) -> NoReturn:
    err.print(f"[red]error:[/red] {message}", markup=True, highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_USAGE)


def _guarded(action: Callable[[], T]) -> T:
    """Run `action`, turning Assay's own errors into a one-line message and exit code 2."""
    try:
        return action()
    except (InputError, NotFoundError) as exc:
        _fail(str(exc))
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"])
        _fail(f"{field}: {first['msg']}" if field else first["msg"])
    except ValueError as exc:
        _fail(str(exc))
    except AssayError as exc:
        _fail(f"{type(exc).__name__}: {exc}")


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def _store(uri: str | None) -> EvidenceStore:
    return _guarded(lambda: open_store(uri))


# ---------------------------------------------------------------- suites


@suite_app.command("publish")
def suite_publish(
    file: Annotated[Path, typer.Argument(help="Suite file (.yaml, .yml or .json).")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Publish a suite file as a new immutable version (identical content is a no-op)."""
    evidence = _store(store)
    suite = _guarded(lambda: load_suite(file))
    version, created = _guarded(lambda: registry.publish(evidence, suite))
    if as_json:
        _print_json(
            {**version.model_dump(mode="json", exclude={"case_hashes"}), "created": created}
        )
        return
    if created:
        out.print(
            f"Published [bold]{version.ref}[/bold] ({version.cases} cases, "
            f"{version.content_hash[:19]}…)"
        )
    else:
        out.print(f"Unchanged: identical to [bold]{version.ref}[/bold] — nothing published")


@suite_app.command("show")
def suite_show(
    ref: Annotated[str, typer.Argument(help="NAME or NAME@VERSION.")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show a published suite version exactly as it was published."""
    evidence = _store(store)
    version, suite = _guarded(lambda: registry.resolve(evidence, ref))
    if as_json:
        _print_json(suite.document())
        return
    out.print(f"[bold]{version.ref}[/bold] — {suite.description or 'no description'}")
    out.print(
        f"published {version.published_at:%Y-%m-%d %H:%M} UTC · {version.content_hash} · "
        f"pass threshold {suite.pass_threshold} · regression threshold "
        f"{suite.regression_threshold}"
    )
    table = Table("case", "class", "scorers", show_lines=False)
    for case in suite.cases:
        labels = [spec.build().label for spec in suite.scorers_for(case)]
        suffix = " (defaults)" if not case.scorers else ""
        table.add_row(case.id, case.query_class or "", "; ".join(labels) + suffix)
    out.print(table)


@suite_app.command("list")
def suite_list(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List published suites with their latest version."""
    evidence = _store(store)
    latest = [registry.latest_version(evidence, name) for name in registry.suite_names(evidence)]
    rows = [v for v in latest if v is not None]
    if as_json:
        _print_json([v.model_dump(mode="json", exclude={"case_hashes"}) for v in rows])
        return
    table = Table("suite", "latest", "cases", "published (UTC)", "content hash")
    for v in rows:
        table.add_row(
            v.suite,
            str(v.version),
            str(v.cases),
            f"{v.published_at:%Y-%m-%d %H:%M}",
            v.content_hash[:19] + "…",
        )
    out.print(table if rows else "No suites published yet.")


# ---------------------------------------------------------------- runs


def _prefect_defaults() -> None:
    """Quiet, offline-friendly Prefect defaults for a terminal; users' own settings win."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    bar = Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task_id = bar.add_task("scoring", total=None)

    def update(done: int, total: int) -> None:
        if total > 1:
            bar.update(task_id, completed=done, total=total)

    with bar, progress.listening(update):
        yield


def _resolve_suite_arg(evidence: EvidenceStore, suite: str) -> str:
    """A suite file is published first; a NAME[@VERSION] must exist. Returns `name@version`."""
    if Path(suite).is_file():
        version, _ = _guarded(lambda: registry.publish(evidence, load_suite(suite)))
    else:
        version, _ = _guarded(lambda: registry.resolve(evidence, suite))
    return version.ref


def execute_run(
    suite: str,
    outputs: str,
    subject: str | None,
    sample: int | None,
    seed: int,
    store: str | None,
    show_progress: bool,
    resume: str | None = None,
    baseline: str | None = None,
    judge_block: str | None = None,
    fresh_judge: bool = False,
) -> EvalResult:
    """Publish (if a file), then run the suite-run flow in this process."""
    evidence = _store(store)
    ref = _resolve_suite_arg(evidence, suite)
    who = _guarded(lambda: Subject.parse(subject) if subject else Subject.default_for(outputs))
    if sample is not None and sample < 1:
        _fail("--sample must be at least 1")
    _prefect_defaults()
    from prefect import tags

    from flows.suite_run import suite_run

    name = registry.parse_ref(ref)[0]
    with tags("assay", f"suite:{name}", f"subject:{who}"), _progress_bar(show_progress):
        return _guarded(
            lambda: suite_run(
                suite=ref,
                outputs=outputs,
                subject=str(who),
                sample=sample,
                seed=seed,
                store=evidence.uri,
                run_id=resume,
                baseline=baseline,
                judge_block=judge_block,
                fresh_judge=fresh_judge,
            )
        )


def _result_json(result: EvalResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def _print_result(result: EvalResult) -> None:
    m = result.metrics
    verdict = "[green]PASSED[/green]" if result.passed else "[red]DID NOT PASS[/red]"
    subject = result.subject
    score = "n/a" if result.score is None else f"{result.score:.3f}"
    out.print(f"[bold]{result.suite}@{result.suite_version}[/bold] · {subject}  {verdict}")
    out.print(
        f"  pass rate {rate_text(m.passed, m.scored)} · threshold "
        f"{result.pass_threshold:.2f} · mean score {score}",
        highlight=False,
    )
    out.print(
        f"  cases {m.cases} · scored {m.scored} · passed {m.passed} · failed {m.failed} · "
        f"skipped {m.skipped} · missing {m.missing} · errors {m.errors}",
        highlight=False,
    )
    for note in warnings(result):
        out.print(f"  [yellow]warning:[/yellow] {note}", highlight=False)
    for line in regression_lines(result.regression):
        out.print(f"  {line}", highlight=False)
    out.print(f"  run [cyan]{result.run_id}[/cyan]", highlight=False)


@app.command("run")
def run(
    suite: Annotated[str, typer.Argument(help="Suite file, or a published NAME[@VERSION].")],
    outputs: Annotated[str, typer.Option("--outputs", help="JSONL file or folder of outputs.")],
    subject: Annotated[
        str | None, typer.Option("--subject", help="KIND:ID[@VARIANT], e.g. agent:bot@v2.")
    ] = None,
    sample: Annotated[
        int | None, typer.Option("--sample", help="Score only N cases, chosen by --seed.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for --sample.")] = 0,
    store: StoreOption = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume", help="Re-run an interrupted run under its RUN_ID; keeps evidence."
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="RUN_ID to compare with (default: pinned, else latest)."),
    ] = None,
    judge_block: Annotated[
        str | None,
        typer.Option("--judge-block", help="Saved JudgeSettings block (default: environment)."),
    ] = None,
    fresh_judge: Annotated[
        bool, typer.Option("--fresh-judge", help="Ignore cached verdicts; judge again.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Score outputs against a suite in a Prefect flow and record the evidence."""
    result = execute_run(
        suite,
        outputs,
        subject,
        sample,
        seed,
        store,
        show_progress=not as_json,
        resume=resume,
        baseline=baseline,
        judge_block=judge_block,
        fresh_judge=fresh_judge,
    )
    if as_json:
        _print_json(_result_json(result))
    else:
        _print_result(result)


@runs_app.command("list")
def runs_list(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List recorded runs, newest first."""
    evidence = _store(store)
    runs = list_runs(evidence)
    if as_json:
        _print_json([run.model_dump(mode="json") for run in runs])
        return
    table = Table("run", "suite", "subject", "status", "pass rate", "started (UTC)")
    for r in runs:
        m = r.metrics
        subject = r.subject
        rate = f"{m.passed}/{m.scored}" if r.status == "completed" else "—"
        table.add_row(
            r.run_id,
            f"{r.suite}@{r.suite_version}",
            subject,
            r.status,
            rate,
            f"{r.started_at:%Y-%m-%d %H:%M:%S}",
        )
    out.print(table if runs else "No runs recorded yet.")


@runs_app.command("show")
def runs_show(
    run_id: Annotated[str, typer.Argument(help="Run id (the Prefect flow run id).")],
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show one run's EvalResult (or its aggregate, while it runs or if it failed)."""
    evidence = _store(store)
    aggregate = _guarded(lambda: load_aggregate(evidence, run_id))
    if aggregate.status != "completed":
        if as_json:
            _print_json(aggregate.model_dump(mode="json"))
        else:
            out.print(
                f"run {run_id}: {aggregate.status}"
                + (f" — {aggregate.error}" if aggregate.error else "")
            )
        return
    result = _guarded(lambda: load_result(evidence, run_id))
    if as_json:
        _print_json(_result_json(result))
    else:
        _print_result(result)


# ---------------------------------------------------------------- pairwise


@app.command("compare")
def compare_command(
    suite: Annotated[str, typer.Argument(help="Suite file, or a published NAME[@VERSION].")],
    outputs_a: Annotated[str, typer.Option("--a", help="Outputs of side A (JSONL file/folder).")],
    outputs_b: Annotated[str, typer.Option("--b", help="Outputs of side B.")],
    label_a: Annotated[str, typer.Option("--label-a", help="Name of side A.")] = "A",
    label_b: Annotated[str, typer.Option("--label-b", help="Name of side B.")] = "B",
    judge_block: Annotated[
        str | None, typer.Option("--judge-block", help="Saved JudgeSettings block.")
    ] = None,
    fresh_judge: Annotated[
        bool, typer.Option("--fresh-judge", help="Ignore cached verdicts.")
    ] = False,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Pairwise A/B: judge each shared case twice with the order swapped."""
    evidence = _store(store)
    ref = _resolve_suite_arg(evidence, suite)
    _prefect_defaults()
    from prefect import tags

    from flows.compare import compare

    with tags("assay", f"suite:{registry.parse_ref(ref)[0]}", "compare"):
        report = _guarded(
            lambda: compare(
                suite=ref,
                outputs_a=outputs_a,
                outputs_b=outputs_b,
                label_a=label_a,
                label_b=label_b,
                store=evidence.uri,
                judge_block=judge_block,
                fresh_judge=fresh_judge,
            )
        )
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    n = report.judged
    out.print(f"[bold]{report.suite}@{report.suite_version}[/bold] · {label_a} vs {label_b}")
    out.print(
        f"  {label_a} wins {report.wins_a}/{n} · {label_b} wins {report.wins_b}/{n} · "
        f"ties {report.ties}/{n} · inconsistent {report.inconsistent}/{n} · "
        f"unjudged {report.unjudged}/{report.cases_compared}",
        highlight=False,
    )
    out.print(f"  win rate {label_a} {rate_text(report.wins_a, n)}", highlight=False)
    out.print(f"  win rate {label_b} {rate_text(report.wins_b, n)}", highlight=False)
    consistency = report.position_consistency
    out.print(
        f"  position consistency {rate_text(consistency.consistent, consistency.judged)}",
        highlight=False,
    )
    for reason, count in report.unjudged_reasons.items():
        out.print(
            f"  [yellow]warning:[/yellow] {count} pair(s) unjudged: {reason}", highlight=False
        )
    out.print(
        f"  comparison [cyan]{report.comparison_id}[/cyan] · {report.calls} call(s), "
        f"{report.cache_hits} cache hit(s), ${report.cost_usd:.4f}",
        highlight=False,
    )


# ---------------------------------------------------------------- baselines, scorecards


@baseline_app.command("pin")
def baseline_pin(
    run_id: Annotated[str, typer.Argument(help="A completed run to compare later runs with.")],
    store: StoreOption = None,
) -> None:
    """Pin a run as the baseline of its suite and subject (append-only record)."""
    record = _guarded(lambda: baselines.pin(_store(store), run_id))
    out.print(f"Pinned {run_id} as the baseline of {record.suite} · {record.subject}")


@baseline_app.command("show")
def baseline_show(
    suite: Annotated[str, typer.Argument(help="Suite name.")],
    subject: Annotated[str, typer.Argument(help="KIND:ID.")],
    variant: Annotated[str | None, typer.Option("--variant", help="Subject variant.")] = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show the pinned baseline of a suite and subject."""
    who = _subject_with_variant(subject, variant)
    run_id = baselines.pinned(_store(store), suite, who)
    if as_json:
        _print_json({"suite": suite, "subject": str(who), "pinned": run_id})
    else:
        out.print(f"{suite} · {who}: " + (run_id or "no pinned baseline (automatic selection)"))


@baseline_app.command("unpin")
def baseline_unpin(
    suite: Annotated[str, typer.Argument(help="Suite name.")],
    subject: Annotated[str, typer.Argument(help="KIND:ID.")],
    variant: Annotated[str | None, typer.Option("--variant", help="Subject variant.")] = None,
    store: StoreOption = None,
) -> None:
    """Remove the pin (recorded as an unpin; automatic selection applies again)."""
    who = _subject_with_variant(subject, variant)
    baselines.unpin(_store(store), suite, who)
    out.print(f"Unpinned the baseline of {suite} · {who}")


def _subject_with_variant(subject: str, variant: str | None) -> Subject:
    who = _guarded(lambda: Subject.parse(subject))
    return who.model_copy(update={"variant": variant}) if variant else who


@app.command("scorecard")
def scorecard_command(
    subject: Annotated[
        str | None, typer.Option("--subject", help="KIND:ID (all variants) or KIND:ID@VARIANT.")
    ] = None,
    suite: Annotated[str | None, typer.Option("--suite", help="Only this suite.")] = None,
    output_format: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    last: Annotated[int, typer.Option("--last", help="Runs in the trend.", min=3)] = 10,
    store: StoreOption = None,
) -> None:
    """Per subject and suite: runs, latest and pooled pass rate with Wilson intervals, trend."""
    if output_format not in ("table", "csv", "json"):
        _fail("--format must be table, csv or json")
    rows = scorecard(_store(store), subject, suite, last)
    if output_format == "json":
        _print_json([row.model_dump(mode="json") for row in rows])
        return
    if output_format == "csv":
        sys.stdout.write(to_csv(rows))
        return
    table = Table("subject", "suite", "runs", "latest", "pooled", "mean score", "trend / run")
    for row in rows:
        slope = (
            "too few runs"
            if row.trend_slope is None
            else f"{row.trend_slope:+.3f} ({row.trend_lo:+.3f}…{row.trend_hi:+.3f})"
        )
        table.add_row(
            row.subject,
            row.suite,
            str(row.runs),
            rate_text(row.latest_passed, row.latest_scored),
            rate_text(row.pooled_passed, row.pooled_scored),
            "n/a" if row.mean_score is None else f"{row.mean_score:.3f}",
            slope,
        )
    out.print(table if rows else "No completed runs yet.")


# ---------------------------------------------------------------- blocks


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
    _prefect_defaults()
    from pydantic import SecretStr

    from blocks import EvidenceStorage

    block = _guarded(
        lambda: EvidenceStorage(
            url=url,
            endpoint_url=endpoint_url,
            region_name=region,
            aws_access_key_id=access_key_id,
            aws_secret_access_key=SecretStr(secret_access_key) if secret_access_key else None,
        )
    )
    _guarded(lambda: block.save(_block_name(name), overwrite=True))
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
    _prefect_defaults()
    from blocks import FinOpsBudget

    block = _guarded(
        lambda: FinOpsBudget.model_validate(
            {"limit_usd": limit_usd, "period": period, "mode": mode, "scope": scope}
        )
    )
    _guarded(lambda: block.save(_block_name(name), overwrite=True))
    out.print(f"Saved budget [bold]{name}[/bold]: {limit_usd} USD per {period}, {mode}, {scope}")


def _block_name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9-]+", name):
        raise InputError(name, "block names use lowercase letters, digits and dashes")
    return name


# ---------------------------------------------------------------- demo


@app.command("demo")
def demo(store: StoreOption = None) -> None:
    """Run the example support-bot suite end to end for two agent versions."""
    suite_file = EXAMPLES / "support-suite.yaml"
    out.print(
        f"[bold]Assay demo[/bold] — suite {suite_file.name}, store "
        f"{_store(store).uri}, ephemeral Prefect (first start takes ~15 s)\n"
    )
    results: list[EvalResult] = []
    for version in ("v1", "v2"):
        outputs = EXAMPLES / "outputs" / f"support-bot-{version}.jsonl"
        result = execute_run(
            str(suite_file),
            str(outputs),
            f"agent:support-bot@{version}",
            None,
            0,
            store,
            show_progress=True,
            baseline=results[0].run_id if results else None,
        )
        _print_result(result)
        out.print()
        results.append(result)
    table = Table("subject", "pass rate", "score", "missing", "verdict", title="Side by side")
    for r in results:
        m = r.metrics
        table.add_row(
            f"agent:support-bot@{r.variant}",
            rate_text(m.passed, m.scored),
            "n/a" if r.score is None else f"{r.score:.3f}",
            str(m.missing),
            "passed" if r.passed else "did not pass",
        )
    out.print(table)
    out.print(
        "\nNext: [bold]assay runs list[/bold], [bold]assay suite show support-bot[/bold], "
        "or open the runs in the Prefect UI (see docs/prefect-ui.md)."
    )


def main() -> None:
    """Console-script entry point."""
    app()
