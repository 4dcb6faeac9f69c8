"""`assay runs list|show|cases`, `assay demo`, and what `assay run` and `assay gate` share:
scoring runs in the suite-run flow."""

from __future__ import annotations

import os
import shlex
import sys
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer
from rich.text import Text

from assay.cli import _common as common

if TYPE_CHECKING:
    from assay.gate.decision import GateRun
    from assay.runs.cases import CaseFilter
    from assay.runs.options import RunOptions
    from assay.runs.pipeline import PreparedRun
    from assay.runs.records import EvalResult, RunAggregate
    from assay.store import EvidenceStore
    from flows.launch import SuiteFlow

runs_app = typer.Typer(help="List and inspect recorded runs.", no_args_is_help=True)
common.app.add_typer(runs_app, name="runs")


def execute_run(options: RunOptions, show_progress: bool) -> EvalResult:
    """Run the suite-run flow in this process; its chunks are scored on threads here, on an
    existing Dask cluster (`options.dask`) or on `options.workers` local processes."""
    return cast("EvalResult", launch_suite_flow("suite_run", (), show_progress, options)[1])


def launch_suite_flow(
    flow: SuiteFlow, tags: tuple[str, ...], show_progress: bool, options: RunOptions
) -> tuple[EvidenceStore, EvalResult | GateRun]:
    """Check the run's inputs here, before Prefect is imported, so bad input exits 2 at once
    (`prepare_run`: the suite published if a file, the outputs validated, once), then hand the
    prepared run to the launcher (flows/launch.py). A Prefect API that stops answering during
    the run ends the command with one line naming the command that resumes it (`_prefect_lost`)."""
    from assay.cli import orchestration
    from assay.cli.judging import check_judge_options
    from assay.runs.pipeline import prepare_run
    from assay.runs.records import now

    check_judge_options(options.calibration)
    evidence = common.open_evidence(options.store)
    prepared = common.guarded(lambda: prepare_run(evidence, options))
    api = common.prefect_defaults()
    from flows.launch import launch

    since = now()
    try:
        with common.progress_bar(show_progress):
            result = common.guarded(
                lambda: launch(
                    prepared,
                    flow,
                    labels=tags,
                    announce=common.announce if show_progress else None,
                )
            )
    except typer.Exit:
        raise  # already said in one line
    except Exception:
        if api is None or orchestration.reachable(api):
            raise
        _prefect_lost(api, prepared, common.guarded(lambda: _started_here(prepared, since)))
    return evidence, result


def _started_here(prepared: PreparedRun, since: datetime) -> str | None:
    """The run this attempt recorded: the resumed one, else the newest run of its suite and
    subject that this process started since `since`; None when none was recorded yet."""
    from assay.runs.lifecycle import this_process
    from assay.runs.records import _RunOf, runs_of_subject
    from assay.suites.registry import parse_ref

    options = prepared.options
    if options.resume:
        return options.run_id
    suite, version = parse_ref(options.suite)  # `name@N` once prepared
    subject = prepared.subject
    indexed_as = _RunOf(  # what the run index files a run under (its suite and subject)
        run_id="",
        suite=suite,
        suite_version=version or 0,
        subject_kind=subject.kind,
        subject_id=subject.id,
        variant=subject.variant,
    )
    me = this_process()
    for run in runs_of_subject(prepared.store, indexed_as):  # newest first
        if run.started_at < since:
            break
        if run.owner is not None and (run.owner.host, run.owner.pid) == (me.host, me.pid):
            return run.run_id
    return None


def _resume_command(prepared: PreparedRun, run_id: str) -> str:
    """The `assay run` that resumes `run_id`: what a resume must repeat (the suite version,
    outputs, subject, sample, chunks), with the judge, baseline and store the run had."""
    from assay.outputs.reference import OutputsReference
    from assay.runs.options import DEFAULT_CHUNK_SIZE

    options = prepared.options
    outputs = options.outputs
    words = ["assay", "run", options.suite, "--outputs", outputs.location]
    if outputs.format != "auto":
        words += ["--outputs-format", outputs.format]
    if outputs.case_attribute != OutputsReference.model_fields["case_attribute"].default:
        words += ["--case-attribute", outputs.case_attribute]
    words += ["--subject", str(prepared.subject)]
    if options.sample is not None:
        words += ["--sample", str(options.sample), "--seed", str(options.seed)]
    if options.chunk_size != DEFAULT_CHUNK_SIZE:
        words += ["--chunk-size", str(options.chunk_size)]
    if options.judge_repeats is not None:
        words += ["--judge-repeats", str(options.judge_repeats)]
    for flag, value in (
        ("--judge-block", options.judge_block),
        ("--calibration", options.calibration),
        ("--baseline", options.baseline),
        ("--store", options.store),
    ):
        if value is not None:
            words += [flag, value]
    if options.cross_suite:
        words.append("--cross-suite")
    return shlex.join([*words, "--resume", run_id])


def _prefect_lost(api: str, prepared: PreparedRun, run_id: str | None) -> NoReturn:
    """Say in one line that the Prefect API stopped answering (and, once the run was recorded,
    how to resume it: its evidence so far is kept), then end the process at once, exit 2.

    At once: Prefect's event and log senders would otherwise try every item they still hold
    against the dead API before the process ends (seconds an item: minutes in all), and nothing
    of Assay's waits there — the evidence is written as the run goes."""
    from assay.cli import orchestration

    try:
        if run_id is None:
            common.fail(orchestration.unreachable(api))
        common.fail(
            f"the Prefect API at {api} stopped answering during run {run_id}; its evidence so "
            f"far is kept: once the API is back (assay server start), resume it with "
            f"{_resume_command(prepared, run_id)}"
        )
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(common.EXIT_USAGE)


def _result_json(result: EvalResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def print_result(result: EvalResult) -> None:
    from assay.judge.reliability import judge_lines
    from assay.rate import rate_text
    from assay.runs.render import (
        check_kind_lines,
        regression_lines,
        trial_lines,
        warnings,
        why_not,
    )

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
    for line in trial_lines(result):
        common.out.print(f"  {line}", highlight=False)
    for line in judge_lines(result):
        common.out.print(f"  {line}", highlight=False)
    for note in warnings(result):
        common.out.print(f"  [yellow]warning:[/yellow] {note}", highlight=False)
    for line in regression_lines(result.regression):
        common.out.print(f"  {line}", highlight=False)
    common.out.print(f"  run [cyan]{result.run_id}[/cyan]", highlight=False)


@runs_app.command("list")
def runs_list(
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
    local: common.LocalOption = False,
) -> None:
    """List recorded runs, newest first: each one's id by its shortest unique prefix of at
    least 8 characters (any command takes it), its verdict and pass rate."""
    endpoint = common.service(server, store, local=local)
    if endpoint is not None:
        from assay.cli import remote

        runs = remote.runs(endpoint)
    else:
        from assay.runs.lifecycle import settled
        from assay.runs.records import list_runs

        evidence = common.open_evidence(store)
        runs = common.guarded(lambda: [settled(run) for run in list_runs(evidence)])
    if as_json:
        common.print_json([run.model_dump(mode="json") for run in runs])
        return
    if not runs:
        from assay.cli.local_service import canonical_store

        where = (
            f"the store of the service at {endpoint.url}"
            if endpoint is not None and not endpoint.local
            else canonical_store(store)
        )
        common.out.print(f"No runs recorded yet in {where}.", highlight=False)
        return
    short = short_ids([run.run_id for run in runs])
    table = common.table("run", "suite", "subject", "verdict", "pass rate", "started (UTC)")
    for r in runs:
        m = r.metrics
        rate = f"{m.passed}/{m.scored}" if r.status == "completed" else "—"
        table.add_row(
            short[r.run_id],
            f"{r.suite}@{r.suite_version}",
            r.subject,
            _verdict(r),
            rate,
            f"{r.started_at:%Y-%m-%d %H:%M:%S}",
        )
    common.out.print(table)


SHORT_ID = 8
"""The fewest characters `assay runs list` shows of a run id (more when two runs share them)."""


def short_ids(run_ids: list[str]) -> dict[str, str]:
    """Each run id by its shortest prefix of at least `SHORT_ID` characters that no other of
    `run_ids` starts with (as git shortens commits)."""
    length = SHORT_ID
    while len({run_id[:length] for run_id in run_ids}) < len(set(run_ids)):
        length += 1
    return {run_id: run_id[:length] for run_id in run_ids}


def _verdict(run: RunAggregate) -> Text:
    """A completed run's verdict (`regressed` against its baseline beats `passed` / `not
    passed`); else its status (`running`, `failed`, `interrupted`)."""
    from assay.regression import RegressionStatus
    from assay.runs.metrics import run_verdict

    if run.status != "completed":
        return Text(run.status, "yellow")
    if run.regression is not None and run.regression.status is RegressionStatus.REGRESSED:
        return Text("regressed", "red")
    passed, _ = run_verdict(run.metrics, run.pass_threshold, run.min_coverage)
    return Text("passed", "green") if passed else Text("not passed", "red")


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
    local: common.LocalOption = False,
) -> None:
    """Show one run's EvalResult (or its aggregate, while it runs or if it failed)."""
    endpoint = common.service(server, store, local=local)
    if endpoint is not None:
        from assay.cli import remote

        if as_json:  # the service's EvalResult (or RunState) JSON is the same as ours
            common.print_json(remote.answer(endpoint, f"/runs/{run_id}"))
            return
        shown = remote.result_or_state(endpoint, run_id)
        from assay.runs.records import EvalResult  # already imported by the client's answer

        if isinstance(shown, EvalResult):
            print_result(shown)
        else:
            common.out.print(
                f"run {run_id}: {shown.status} ({shown.chunks_done}/{shown.chunks} chunks)"
            )
        return
    from assay.runs.lifecycle import settled
    from assay.runs.records import load_aggregate, load_result, resolve_run_id

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
    print_shown(common.guarded(lambda: load_result(evidence, run_id)), as_json)


def print_shown(result: EvalResult, as_json: bool) -> None:
    if as_json:
        common.print_json(_result_json(result))
    else:
        print_result(result)


@runs_app.command("cases")
def runs_cases(
    run_id: Annotated[
        str,
        typer.Argument(
            help="Run id (the Prefect flow run id), or a unique prefix of one (4+ characters).",
            callback=common.checked_run_id,
        ),
    ],
    status: Annotated[
        str | None,
        typer.Option("--status", help="Only cases that passed, failed, skipped or error."),
    ] = None,
    turns: Annotated[
        bool,
        typer.Option("--turns", help="List each turn's verdict under its conversation."),
    ] = False,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
    local: common.LocalOption = False,
) -> None:
    """List each case of a run: its status, score and check labels (a conversation: the first
    failing turn of how many; `--turns`: each turn's verdict; `--json`: every turn, nested)."""
    from assay.runs.cases import CASE_STATUSES

    if status is not None and status not in CASE_STATUSES:
        common.fail(f"--status must be one of {', '.join(CASE_STATUSES)}")
    wanted = cast("CaseFilter | None", status)
    endpoint = common.service(server, store, local=local)
    if endpoint is not None:
        from assay.cli import remote

        cases = remote.cases(endpoint, run_id, wanted)
    else:
        from assay.runs.cases import case_results
        from assay.runs.records import resolve_run_id

        evidence = common.open_evidence(store)
        run_id = common.guarded(lambda: resolve_run_id(evidence, run_id))
        cases = common.guarded(lambda: list(case_results(evidence, run_id, wanted)))
    if as_json:
        common.print_json([case.model_dump(mode="json") for case in cases])
        return
    conversations = any(case.turns is not None for case in cases)
    table = common.table("case", "status", "score", *(["turns"] if conversations else []), "label")
    for case in cases:
        name = case.case_id if case.trial is None else f"{case.case_id} #{case.trial}"
        column = [case.turns_text()] if conversations else []
        table.add_row(Text(name), case.status.value, _score(case.score), *column, Text(case.label))
        if turns:
            for turn in case.turns or []:
                blank = [""] * len(column)
                row = (f"  turn {turn.turn}", turn.status.value, _score(turn.score), *blank)
                table.add_row(*row, Text(turn.label))
    common.out.print(table if cases else "No such cases in this run.")


def _score(score: float | None) -> str:
    return "—" if score is None else f"{score:.3f}"


@common.app.command("demo")
def demo(store: common.StoreOption = None, local: common.LocalOption = False) -> None:
    """Run the example support-bot suite end to end for two agent versions."""
    from assay.cli._run_flags import run_options
    from assay.outputs.reference import OutputsReference
    from assay.rate import rate_text
    from assay.runs.options import RunOptions

    suite_file = common.EXAMPLES / "support-suite.yaml"
    endpoint = common.service(None, store, local=local)
    common.out.print(
        f"[bold]Assay demo[/bold] — suite {suite_file.name}, store "
        f"{common.open_evidence(store).uri}; {common.path_taken(endpoint)}\n"
    )
    results: list[EvalResult] = []
    for version in ("v1", "v2"):
        outputs = common.EXAMPLES / "outputs" / f"support-bot-{version}.jsonl"
        options = run_options(
            RunOptions,
            suite=str(suite_file),
            outputs=OutputsReference(location=str(outputs)),
            subject=f"agent:support-bot@{version}",
            store=store,
            baseline=results[0].run_id if results else None,
        )
        if endpoint is not None:
            from assay.cli import remote

            sent = options.model_dump(include={"subject", "baseline"}, exclude_none=True)
            result = remote.run(endpoint, str(suite_file), options.outputs, sent)
        else:
            result = execute_run(options, show_progress=True)
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
