"""`assay run`, `assay runs list|show|cases` and `assay demo`: scoring runs in the suite-run
flow."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from functools import partial
from importlib import import_module
from typing import Annotated, Any, cast

import typer
from rich.text import Text

from assay.cli import _common as common
from assay.cli.judging import check_judge_options
from assay.dask_reference import check_reference
from assay.judge.reliability import judge_lines
from assay.outputs import DEFAULT_CASE_ATTRIBUTE
from assay.rate import rate_text
from assay.runs.cases import CASE_STATUSES, CaseFilter, case_results
from assay.runs.lifecycle import recorded_for_resume, settled
from assay.runs.records import (
    EvalResult,
    list_runs,
    load_aggregate,
    load_result,
    resolve_run_id,
)
from assay.runs.render import check_kind_lines, regression_lines, warnings, why_not
from assay.store import EvidenceStore
from assay.subject import Subject
from assay.suites import registry

runs_app = typer.Typer(help="List and inspect recorded runs.", no_args_is_help=True)
common.app.add_typer(runs_app, name="runs")


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
    calibration: str | None = None,
    judge_repeats: int | None = None,
    dask: str | None = None,
    workers: int | None = None,
    chunk_size: int | None = None,
) -> EvalResult:
    """Publish (if a file), then run the suite-run flow in this process; its chunks are scored
    on threads here, on an existing Dask cluster (`dask`) or on `workers` local processes."""
    if chunk_size is not None and chunk_size < 1:
        common.fail("--chunk-size must be at least 1")
    _, result = launch_suite_flow(
        "suite_run",
        (),
        show_progress,
        suite=suite,
        outputs=outputs,
        subject=subject,
        sample=sample,
        seed=seed,
        store=store,
        run_id=resume,
        resume=resume is not None,
        baseline=baseline,
        judge_block=judge_block,
        fresh_judge=fresh_judge,
        calibration=calibration,
        judge_repeats=judge_repeats,
        chunks_on=(dask, workers),
        **({"chunk_size": chunk_size} if chunk_size else {}),
    )
    return cast(EvalResult, result)


def launch_suite_flow(
    flow: str,
    tags: tuple[str, ...],
    show_progress: bool,
    *,
    suite: str,
    outputs: str,
    subject: str | None,
    sample: int | None,
    store: str | None,
    chunks_on: tuple[str | None, int | None] | None = None,
    **parameters: Any,
) -> tuple[EvidenceStore, Any]:
    """Publish the suite (if a file), parse the subject once, then run `flows.<flow>` (the
    suite-run flow or the gate, which take the same parameters) in this process."""
    if sample is not None and sample < 1:
        common.fail("--sample must be at least 1")
    who = common.guarded(lambda: Subject.given_or_default(subject, outputs))
    check_judge_options(
        parameters.get("calibration"),
        parameters.get("judge_repeats"),
        parameters.get("max_judge_flip_rate"),
    )
    if chunks_on is not None and chunks_on[0]:
        common.guarded(partial(check_reference, chunks_on[0]))
    evidence = common.open_evidence(store)
    ref = common.resolve_suite_arg(evidence, suite, outputs)
    if parameters.get("resume"):
        common.guarded(lambda: recorded_for_resume(evidence, parameters["run_id"]))
    common.prefect_defaults()
    from prefect import tags as run_tags

    run = getattr(import_module(f"flows.{flow}"), flow)
    on_workers: Any = nullcontext()
    if chunks_on is not None:  # `--dask`/`--workers` (or ASSAY_DASK_ADDRESS) for the chunks
        from flows.runners import api_for_workers, reachable_chunk_runner

        runner = common.guarded(lambda: reachable_chunk_runner(*chunks_on))
        # A temporary cluster's scheduler lives in this process and logs every worker's coming
        # and going at INFO through Prefect's console handler; a terminal wants warnings only.
        logging.getLogger("distributed").setLevel(logging.WARNING)
        run, on_workers = run.with_options(task_runner=runner), api_for_workers(runner)
    name = registry.parse_ref(ref)[0]
    labels = ("assay", *tags, f"suite:{name}", f"subject:{who}")
    with run_tags(*labels), on_workers, common.progress_bar(show_progress):
        result = common.guarded(
            lambda: common.launch(
                run,
                quiet=not show_progress,
                suite=ref,
                outputs=outputs,
                subject=str(who),
                sample=sample,
                store=evidence.uri,
                **parameters,
            )
        )
    return evidence, result


def _result_json(result: EvalResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def print_result(result: EvalResult) -> None:
    m = result.metrics
    verdict = Text("PASSED", "green") if result.passed else Text("DID NOT PASS", "red")
    subject = result.subject
    score = "n/a" if result.score is None else f"{result.score:.3f}"
    common.out.print(
        Text.assemble(
            (f"{result.suite}@{result.suite_version}", "bold"),
            f" · {subject}  ",
            verdict,
            why_not(result),
        ),
        highlight=False,
    )
    common.out.print(
        f"  pass rate {rate_text(m.passed, m.scored)} · threshold "
        f"{result.pass_threshold:.2f} · coverage {m.coverage_text()} (min "
        f"{result.min_coverage:g}) · mean score {score}",
        highlight=False,
    )
    common.out.print(
        f"  cases {m.cases} · scored {m.scored} · passed {m.passed} · failed {m.failed} · "
        f"skipped {m.skipped} · missing {m.missing} · errors {m.errors}",
        highlight=False,
    )
    for line in check_kind_lines(result):
        common.out.print(f"  check {line}", highlight=False)
    for line in judge_lines(result):
        common.out.print(f"  {line}", highlight=False)
    for note in warnings(result):
        common.out.print(f"  [yellow]warning:[/yellow] {note}", highlight=False)
    for line in regression_lines(result.regression):
        common.out.print(f"  {line}", highlight=False)
    common.out.print(f"  run [cyan]{result.run_id}[/cyan]", highlight=False)


@common.app.command("run")
def run(
    suite: Annotated[str, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")],
    outputs: Annotated[
        str,
        typer.Option("--outputs", help="JSONL or OTLP trace export: file, folder or s3:// prefix."),
    ],
    subject: common.SubjectOption = None,
    sample: common.SampleOption = None,
    seed: common.SeedOption = 0,
    store: common.StoreOption = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Re-run an interrupted run under its RUN_ID; keeps evidence.",
            callback=common.checked_run_id,
        ),
    ] = None,
    baseline: common.BaselineOption = None,
    judge_block: common.JudgeBlockOption = None,
    fresh_judge: common.FreshJudgeOption = False,
    outputs_format: common.OutputsFormatOption = "auto",
    case_attribute: common.CaseAttributeOption = DEFAULT_CASE_ATTRIBUTE,
    calibration: common.CalibrationOption = None,
    judge_repeats: common.JudgeRepeatsOption = None,
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
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
) -> None:
    """Score outputs against a suite in a Prefect flow and record the evidence (or, with
    --server / $ASSAY_URL, have the Assay service do it)."""
    url = common.service(server, store)
    if url is not None:
        from assay.cli import remote

        remote.refuse_local_options(
            outputs_format,
            case_attribute,
            resume=resume,
            calibration=calibration,
            judge_repeats=judge_repeats,
            dask=dask,
            workers=workers,
            chunk_size=chunk_size,
        )
        result = remote.run(
            url,
            suite,
            outputs,
            subject,
            sample,
            seed,
            baseline=baseline,
            judge_block=judge_block,
            fresh_judge=fresh_judge or None,
        )
    else:
        result = execute_run(
            suite,
            common.outputs_reference(outputs, outputs_format, case_attribute),
            subject,
            sample,
            seed,
            store,
            show_progress=not as_json,
            resume=resume,
            baseline=baseline,
            judge_block=judge_block,
            fresh_judge=fresh_judge,
            calibration=calibration,
            judge_repeats=judge_repeats,
            dask=dask,
            workers=workers,
            chunk_size=chunk_size,
        )
    if as_json:
        common.print_json(_result_json(result))
    else:
        print_result(result)


@runs_app.command("list")
def runs_list(
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
) -> None:
    """List recorded runs, newest first."""
    url = common.service(server, store)
    if url is not None:
        from assay.cli import remote

        runs = remote.runs(url)
    else:
        evidence = common.open_evidence(store)
        runs = common.guarded(lambda: [settled(run) for run in list_runs(evidence)])
    if as_json:
        common.print_json([run.model_dump(mode="json") for run in runs])
        return
    table = common.table("run", "suite", "subject", "status", "pass rate", "started (UTC)")
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
    common.out.print(table if runs else "No runs recorded yet.")


@runs_app.command("show")
def runs_show(
    run_id: Annotated[
        str,
        typer.Argument(
            help="Run id (the Prefect flow run id), or a unique prefix of one (4+ characters).",
            callback=common.checked_run_id,
        ),
    ],
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
) -> None:
    """Show one run's EvalResult (or its aggregate, while it runs or if it failed)."""
    url = common.service(server, store)
    if url is not None:
        from assay.cli import remote

        shown = remote.result_or_state(url, run_id)
        if isinstance(shown, EvalResult):
            _print_shown(shown, as_json)
        elif as_json:
            common.print_json(shown.model_dump(mode="json"))
        else:
            common.out.print(
                f"run {run_id}: {shown.status} ({shown.chunks_done}/{shown.chunks} chunks)"
            )
        return
    evidence = common.open_evidence(store)
    run_id = common.guarded(lambda: resolve_run_id(evidence, run_id))
    aggregate = common.guarded(lambda: settled(load_aggregate(evidence, run_id)))
    if aggregate.status != "completed":
        if as_json:
            common.print_json(aggregate.model_dump(mode="json"))
        else:
            common.out.print(
                f"run {run_id}: {aggregate.status}"
                + (f" — {aggregate.error}" if aggregate.error else "")
            )
        return
    _print_shown(common.guarded(lambda: load_result(evidence, run_id)), as_json)


def _print_shown(result: EvalResult, as_json: bool) -> None:
    if as_json:
        common.print_json(_result_json(result))
    else:
        print_result(result)


@runs_app.command("cases")
def runs_cases(
    run_id: Annotated[str, typer.Argument(help="Run id (the Prefect flow run id).")],
    status: Annotated[
        str | None,
        typer.Option("--status", help="Only cases that passed, failed, skipped or error."),
    ] = None,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
) -> None:
    """List each case of a run: its status, score and check labels."""
    if status is not None and status not in CASE_STATUSES:
        common.fail(f"--status must be one of {', '.join(CASE_STATUSES)}")
    wanted = cast(CaseFilter | None, status)
    url = common.service(server, store)
    if url is not None:
        from assay.cli import remote

        cases = remote.cases(url, run_id, wanted)
    else:
        evidence = common.open_evidence(store)
        run_id = common.guarded(lambda: resolve_run_id(evidence, run_id))
        cases = common.guarded(lambda: list(case_results(evidence, run_id, wanted)))
    if as_json:
        common.print_json([case.model_dump(mode="json") for case in cases])
        return
    table = common.table("case", "status", "score", "label")
    for case in cases:
        score = "—" if case.score is None else f"{case.score:.3f}"
        table.add_row(Text(case.case_id), case.status.value, score, Text(case.label))
    common.out.print(table if cases else "No such cases in this run.")


@common.app.command("demo")
def demo(store: common.StoreOption = None) -> None:
    """Run the example support-bot suite end to end for two agent versions."""
    suite_file = common.EXAMPLES / "support-suite.yaml"
    common.out.print(
        f"[bold]Assay demo[/bold] — suite {suite_file.name}, store "
        f"{common.open_evidence(store).uri}, Prefect: the `assay server start` server if it is "
        "up, else an ephemeral API (its first start takes ~15 s)\n"
    )
    results: list[EvalResult] = []
    for version in ("v1", "v2"):
        outputs = common.EXAMPLES / "outputs" / f"support-bot-{version}.jsonl"
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
        common.out.print()
        results.append(result)
    table = common.table(
        "subject", "pass rate", "score", "missing", "verdict", title="Side by side"
    )
    for r in results:
        m = r.metrics
        table.add_row(
            f"agent:support-bot@{r.variant}",
            rate_text(m.passed, m.scored),
            "n/a" if r.score is None else f"{r.score:.3f}",
            str(m.missing),
            "passed" if r.passed else "did not pass",
        )
    common.out.print(table)
    common.out.print(
        "\nNext: [bold]assay runs list[/bold], [bold]assay suite show support-bot[/bold], "
        "or the runs in the Prefect UI (`assay server start` keeps them; docs/prefect-ui.md)."
    )
