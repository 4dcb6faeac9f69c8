"""`assay run`, `assay runs list|show` and `assay demo`: scoring runs in the suite-run flow."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer
from rich.table import Table

from assay.cli._common import (
    EXAMPLES,
    FreshJudgeOption,
    JsonOption,
    JudgeBlockOption,
    StoreOption,
    app,
    fail,
    guarded,
    open_evidence,
    out,
    prefect_defaults,
    print_json,
    progress_bar,
    resolve_suite_arg,
)
from assay.rate import rate_text
from assay.runs.records import EvalResult, list_runs, load_aggregate, load_result
from assay.runs.render import regression_lines, warnings
from assay.subject import Subject
from assay.suites import registry

runs_app = typer.Typer(help="List and inspect recorded runs.", no_args_is_help=True)
app.add_typer(runs_app, name="runs")


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
    dask: str | None = None,
    workers: int | None = None,
    chunk_size: int | None = None,
) -> EvalResult:
    """Publish (if a file), then run the suite-run flow in this process; its chunks are scored
    on threads here, on an existing Dask cluster (`dask`) or on `workers` local processes."""
    evidence = open_evidence(store)
    ref = resolve_suite_arg(evidence, suite)
    who = guarded(lambda: Subject.given_or_default(subject, outputs))
    if sample is not None and sample < 1:
        fail("--sample must be at least 1")
    if chunk_size is not None and chunk_size < 1:
        fail("--chunk-size must be at least 1")
    prefect_defaults()
    from prefect import tags

    from flows.runners import api_for_workers, reachable_chunk_runner
    from flows.suite_run import DEFAULT_CHUNK_SIZE, suite_run

    runner = guarded(lambda: reachable_chunk_runner(dask, workers))
    # A temporary cluster's scheduler lives in this process and logs every worker's coming and
    # going at INFO through Prefect's console handler; a terminal wants warnings only.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    flow = suite_run.with_options(task_runner=runner)

    name = registry.parse_ref(ref)[0]
    with (
        tags("assay", f"suite:{name}", f"subject:{who}"),
        api_for_workers(runner),
        progress_bar(show_progress),
    ):
        return guarded(
            lambda: flow(
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
                chunk_size=chunk_size or DEFAULT_CHUNK_SIZE,
            )
        )


def _result_json(result: EvalResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def print_result(result: EvalResult) -> None:
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
    judge_block: JudgeBlockOption = None,
    fresh_judge: FreshJudgeOption = False,
    dask: Annotated[
        str | None,
        typer.Option(
            "--dask",
            help="Score chunks on the Dask scheduler at ADDRESS (or block:NAME); "
            "default $ASSAY_DASK_ADDRESS.",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option("--workers", help="Score chunks on a temporary local Dask cluster of N."),
    ] = None,
    chunk_size: Annotated[
        int | None, typer.Option("--chunk-size", help="Cases per scoring chunk (default 2000).")
    ] = None,
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
        dask=dask,
        workers=workers,
        chunk_size=chunk_size,
    )
    if as_json:
        print_json(_result_json(result))
    else:
        print_result(result)


@runs_app.command("list")
def runs_list(store: StoreOption = None, as_json: JsonOption = False) -> None:
    """List recorded runs, newest first."""
    evidence = open_evidence(store)
    runs = list_runs(evidence)
    if as_json:
        print_json([run.model_dump(mode="json") for run in runs])
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
    evidence = open_evidence(store)
    aggregate = guarded(lambda: load_aggregate(evidence, run_id))
    if aggregate.status != "completed":
        if as_json:
            print_json(aggregate.model_dump(mode="json"))
        else:
            out.print(
                f"run {run_id}: {aggregate.status}"
                + (f" — {aggregate.error}" if aggregate.error else "")
            )
        return
    result = guarded(lambda: load_result(evidence, run_id))
    if as_json:
        print_json(_result_json(result))
    else:
        print_result(result)


@app.command("demo")
def demo(store: StoreOption = None) -> None:
    """Run the example support-bot suite end to end for two agent versions."""
    suite_file = EXAMPLES / "support-suite.yaml"
    out.print(
        f"[bold]Assay demo[/bold] — suite {suite_file.name}, store "
        f"{open_evidence(store).uri}, ephemeral Prefect (first start takes ~15 s)\n"
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
        print_result(result)
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
