"""`assay gate`: run a suite and turn the result into a CI exit code, JUnit XML and evidence.

Exit codes: 0 when the verdict is pass; 1 when the gate fails, with every reason listed; 2 on
usage and input errors. `assay gate --check RUN_ID` re-checks a past gate run and exits 0 only
when its effective verdict (after any governed override) is pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn, cast

import typer

from assay.cli import _common as common
from assay.cli.runs import launch_suite_flow, print_result
from assay.gate.decision import GateDecision, GateReport, GateRun
from assay.gate.junit import junit_xml
from assay.gate.overrides import check_gate
from assay.outputs import DEFAULT_CASE_ATTRIBUTE
from assay.runs.records import read_cases

EXIT_GATE_FAILED = 1


def _print_decision(decision: GateDecision | GateReport) -> None:
    for rule in decision.rules:
        mark = "[green]pass[/green]" if rule.passed else "[red]FAIL[/red]"
        common.out.print(f"  {mark} {rule.rule}: {rule.detail}", highlight=False)
    for note in decision.warnings:
        common.out.print(f"  [yellow]warning:[/yellow] {note}", highlight=False)
    verdict = (
        "[green]GATE PASSED[/green]" if decision.verdict == "pass" else "[red]GATE FAILED[/red]"
    )
    reasons = ", ".join(reason.rule for reason in decision.reasons)
    common.out.print(f"{verdict}" + (f" — {reasons}" if reasons else ""), highlight=False)


def _check(run_id: str, store: str | None, as_json: bool, url: str | None) -> None:
    if url is not None:
        from assay.cli import remote

        check = remote.gate_check(url, run_id)
    else:
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
    raise typer.Exit(0 if check.effective == "pass" else EXIT_GATE_FAILED)


def _remote_gate(url: str, as_json: bool, *args: Any, **options: Any) -> NoReturn:
    """`assay gate` through the service (`--server` / `$ASSAY_URL`): `remote.gate`'s arguments."""
    from assay.cli import remote

    report = remote.gate(url, *args, **options)
    if as_json:
        common.print_json(report.model_dump(mode="json"))
    else:
        print_result(report.result)
        _print_decision(report)
    raise typer.Exit(0 if report.verdict == "pass" else EXIT_GATE_FAILED)


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
        Path | None, typer.Option("--junit", help="Write JUnit XML here (cases + gate rules).")
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
            help="Fail when more than this share of checks flip across --judge-repeats.",
        ),
    ] = None,
    store: common.StoreOption = None,
    outputs_format: common.OutputsFormatOption = "auto",
    case_attribute: common.CaseAttributeOption = DEFAULT_CASE_ATTRIBUTE,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
) -> None:
    """Run the suite, then fail (exit 1) on regression, low pass rate, an uncalibrated judge or
    a blocked budget; exit 0 otherwise."""
    url = common.service(server, store)
    if check is not None:
        _check(check, store, as_json, url)
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
        _remote_gate(
            url,
            as_json,
            suite,
            outputs,
            subject,
            sample,
            seed,
            baseline=baseline,
            judge_block=judge_block,
        )
    evidence, launched = launch_suite_flow(
        "gate",
        ("gate",),
        not as_json,
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
    run = cast(GateRun, launched)
    if junit is not None:
        cases = list(read_cases(evidence, run.decision.run_id))
        junit.write_text(junit_xml(run.decision, cases), encoding="utf-8")
    if as_json:
        common.print_json(GateReport.of(run).model_dump(mode="json"))
    else:
        print_result(run.result)
        _print_decision(run.decision)
    raise typer.Exit(0 if run.decision.verdict == "pass" else EXIT_GATE_FAILED)
