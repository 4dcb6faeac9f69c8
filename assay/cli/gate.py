"""`assay gate`: run a suite and turn the result into a CI exit code, JUnit XML and evidence.

Exit codes: 0 when the verdict is pass; 1 when the gate fails, with every reason listed; 2 on
usage and input errors. `assay gate --check RUN_ID` re-checks a past gate run and exits 0 only
when its effective verdict (after any governed override) is pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, cast

import typer
from rich.text import Text

from assay.cli import _common as common
from assay.cli._commands import DEFAULT_CASE_ATTRIBUTE
from assay.cli.runs import launch_suite_flow, print_result

if TYPE_CHECKING:
    from assay.gate.decision import GateDecision, GateReport, GateVerdict

EXIT_GATE_FAILED = 1


def _exit_code(verdict: GateVerdict, allow_insufficient: bool) -> int:
    from assay.gate.decision import INSUFFICIENT

    passing = verdict == "pass" or (allow_insufficient and verdict == INSUFFICIENT)
    return 0 if passing else EXIT_GATE_FAILED


def _print_decision(decision: GateDecision | GateReport) -> None:
    from assay.gate.decision import GateDecision

    for rule in decision.rules:
        mark = "[green]pass[/green]" if rule.passed else "[red]FAIL[/red]"
        common.out.print(f"  {mark} {rule.rule}: {rule.detail}", highlight=False)
    for note in decision.warnings:
        common.out.print(f"  [yellow]warning:[/yellow] {note}", highlight=False)
    verdict = {
        "pass": "[green]GATE PASSED[/green]",
        "fail": "[red]GATE FAILED[/red]",
    }.get(decision.verdict, "[yellow]GATE: INSUFFICIENT EVIDENCE[/yellow]")
    if isinstance(decision, GateDecision) and decision.what_if:
        verdict = f"WHAT-IF (nothing recorded): {verdict}"
    reasons = ", ".join(reason.rule for reason in decision.reasons)
    common.out.print(f"{verdict}" + (f" — {reasons}" if reasons else ""), highlight=False)


def _what_if(
    run_id: str,
    store: str | None,
    as_json: bool,
    thresholds: tuple[float, float | None, float | None],
    allow_insufficient: bool,
) -> None:
    from assay.gate.decision import what_if

    pass_threshold, min_coverage, max_flip_rate = thresholds
    decision: GateDecision = common.guarded(
        lambda: what_if(
            common.open_evidence(store), run_id, pass_threshold, min_coverage, max_flip_rate
        )
    )
    if as_json:
        common.print_json(decision.model_dump(mode="json"))
    else:
        _print_decision(decision)
    raise typer.Exit(_exit_code(decision.verdict, allow_insufficient))


def _check(
    run_id: str, store: str | None, as_json: bool, url: str | None, allow_insufficient: bool
) -> None:
    if url is not None:
        from assay.cli import remote

        check = remote.gate_check(url, run_id)
    else:
        from assay.gate.overrides import check_gate

        check = common.guarded(lambda: check_gate(common.open_evidence(store), run_id))
    if as_json:
        common.print_json(check.model_dump(mode="json"))
    else:
        common.out.print(
            f"run {run_id}: recorded [bold]{check.recorded}[/bold] · effective "
            f"[bold]{check.effective}[/bold]"
            + (f" (overridden by {check.override.principal})" if check.override else ""),
            highlight=False,
        )
        for reason in check.reasons:
            common.out.print(f"  recorded reason {reason.rule}: {reason.message}", highlight=False)
    raise typer.Exit(_exit_code(check.effective, allow_insufficient))


def _write_aside(path: Path, text: str, what: str) -> None:
    """Write a file the gate gives besides its verdict (the pull-request comment, JUnit XML); one
    that cannot be written is a warning on stderr, never the gate's exit code, which stays its
    verdict's."""
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        common.err.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" cannot write the {what} to {path} "
                f"({exc.strerror or type(exc).__name__}); the exit code is the gate's verdict",
            ),
            highlight=False,
            soft_wrap=True,
        )


def _gate_answer(
    report: GateReport,
    decision: GateDecision | GateReport,
    comment: Path | None,
    report_url: str | None,
    as_json: bool,
    allow_insufficient: bool,
) -> NoReturn:
    """A gate's answer, whether it ran here or in the service: the pull-request comment (with
    `--comment`), the report or its JSON, and the exit code of its verdict."""
    if comment is not None:
        from assay.gate.comment import gate_comment

        _write_aside(comment, gate_comment(report, report_url), "pull-request comment")
    if as_json:
        common.print_json(report.model_dump(mode="json"))
    else:
        print_result(report.result)
        _print_decision(decision)
    raise typer.Exit(_exit_code(report.verdict, allow_insufficient))


@common.app.command("gate")
def gate_command(
    suite: Annotated[
        str | None, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")
    ] = None,
    outputs: Annotated[
        str | None,
        typer.Option("--outputs", help="JSONL or OTLP trace export: file, folder or s3:// prefix."),
    ] = None,
    subject: common.SubjectOption = None,
    baseline: common.BaselineOption = None,
    sample: common.SampleOption = None,
    seed: common.SeedOption = 0,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            help="Write JUnit XML here (cases + gate rules). A path that cannot be written is a "
            "warning, never the exit code.",
        ),
    ] = None,
    comment: Annotated[
        Path | None,
        typer.Option(
            "--comment",
            help="Write the pull-request comment (markdown) here; `assay github comment` posts "
            "it. A path that cannot be written is a warning, never the exit code.",
        ),
    ] = None,
    report_url: Annotated[
        str | None,
        typer.Option(
            "--report-url",
            envvar="ASSAY_URL",
            help="The Assay service's URL: the comment links its /runs/{id}/report.",
        ),
    ] = None,
    check: Annotated[
        str | None,
        typer.Option(
            "--check",
            help="Re-check a past gate run's effective verdict instead.",
            callback=common.checked_run_id,
        ),
    ] = None,
    judge_block: common.JudgeBlockOption = None,
    calibration: common.CalibrationOption = None,
    judge_repeats: common.JudgeRepeatsOption = None,
    max_judge_flip_rate: Annotated[
        float | None,
        typer.Option(
            "--max-judge-flip-rate",
            help=common.option_help("max_judge_flip_rate"),
        ),
    ] = None,
    pass_threshold: Annotated[
        float | None,
        typer.Option(
            "--pass-threshold",
            min=0.0,
            max=1.0,
            help="With --check: what-if — the decision at this pass threshold (nothing recorded,"
            " no judge call).",
        ),
    ] = None,
    min_coverage: Annotated[
        float | None,
        typer.Option(
            "--min-coverage", min=0.0, max=1.0, help="With --pass-threshold: what-if coverage."
        ),
    ] = None,
    allow_insufficient: Annotated[
        bool,
        typer.Option(
            "--allow-insufficient",
            help="Exit 0 when the only failed rule is insufficient_evidence (non-inferiority).",
        ),
    ] = False,
    store: common.StoreOption = None,
    outputs_format: common.OutputsFormatOption = "auto",
    case_attribute: common.CaseAttributeOption = DEFAULT_CASE_ATTRIBUTE,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
) -> None:
    """Run the suite, then fail (exit 1) on regression, low pass rate, an uncalibrated judge or
    a blocked budget; exit 0 otherwise."""
    url = common.service(server, store)
    if (min_coverage is not None) and pass_threshold is None:
        common.fail("--min-coverage is a what-if option: use it with --check and --pass-threshold")
    if pass_threshold is not None:
        if check is None:
            common.fail("--pass-threshold is a what-if: use it with --check RUN_ID")
        thresholds = (pass_threshold, min_coverage, max_judge_flip_rate)
        _what_if(check, store, as_json, thresholds, allow_insufficient)
    if check is not None:
        _check(check, store, as_json, url, allow_insufficient)
    if suite is None or outputs is None:
        common.fail("assay gate needs SUITE and --outputs (or --check RUN_ID)")
    if url is not None:
        from assay.cli import remote

        remote.refuse_local_options(
            outputs_format,
            case_attribute,
            junit=junit,
            calibration=calibration,
            judge_repeats=judge_repeats,
            max_judge_flip_rate=max_judge_flip_rate,
        )
        report = remote.gate(
            url, suite, outputs, subject, sample, seed, baseline=baseline, judge_block=judge_block
        )
        _gate_answer(report, report, comment, report_url, as_json, allow_insufficient)
    from assay.runs.options import GateOptions

    options = common.run_options(
        GateOptions,
        suite=suite,
        outputs=common.outputs_reference(outputs, outputs_format, case_attribute),
        subject=subject,
        sample=sample,
        store=store,
        seed=seed,
        baseline=baseline,
        judge_block=judge_block,
        calibration=calibration,
        judge_repeats=judge_repeats,
        max_judge_flip_rate=max_judge_flip_rate,
    )
    from assay.gate.decision import GateReport, GateRun

    evidence, launched = launch_suite_flow("gate", ("gate",), not as_json, options)
    run = cast(GateRun, launched)
    if junit is not None:
        from assay.gate.junit import junit_xml
        from assay.runs.records import read_decided_cases

        cases = read_decided_cases(evidence, run.decision.run_id)
        _write_aside(junit, junit_xml(run.decision, cases), "JUnit XML")
    _gate_answer(GateReport.of(run), run.decision, comment, report_url, as_json, allow_insufficient)
