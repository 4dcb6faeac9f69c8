"""`assay gate`: run a suite and turn the result into a CI exit code, JUnit XML and evidence.

Exit codes: 0 when the verdict is pass; 1 when the gate fails, with every reason listed; 2 on
usage and input errors. `assay gate --check RUN_ID` re-checks a past gate run and exits 0 only
when its effective verdict (after any governed override) is pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from assay.cli._common import (
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
from assay.cli.runs import print_result
from assay.gate.decision import GateDecision, GateRun
from assay.gate.junit import junit_xml
from assay.gate.overrides import GateCheck, check_gate
from assay.runs.records import read_cases
from assay.subject import Subject
from assay.suites import registry

EXIT_GATE_FAILED = 1


def _print_decision(decision: GateDecision) -> None:
    for rule in decision.rules:
        mark = "[green]pass[/green]" if rule.passed else "[red]FAIL[/red]"
        out.print(f"  {mark} {rule.rule}: {rule.detail}", highlight=False)
    for note in decision.warnings:
        out.print(f"  [yellow]warning:[/yellow] {note}", highlight=False)
    verdict = (
        "[green]GATE PASSED[/green]" if decision.verdict == "pass" else "[red]GATE FAILED[/red]"
    )
    reasons = ", ".join(reason.rule for reason in decision.reasons)
    out.print(f"{verdict}" + (f" — {reasons}" if reasons else ""), highlight=False)


def _gate_json(run: GateRun) -> dict[str, Any]:
    decision = run.decision
    return {
        "verdict": decision.verdict,
        "reasons": [reason.model_dump() for reason in decision.reasons],
        "warnings": decision.warnings,
        "run_id": decision.run_id,
        "effective_verdict": decision.verdict,
        "rules": [rule.model_dump() for rule in decision.rules],
        "unjudged_cases": decision.unjudged_cases,
        "result": run.result.model_dump(mode="json"),
    }


def _check(run_id: str, store: str | None, as_json: bool) -> None:
    check: GateCheck = guarded(lambda: check_gate(open_evidence(store), run_id))
    if as_json:
        print_json(check.model_dump(mode="json"))
    else:
        out.print(
            f"run {run_id}: recorded [bold]{check.recorded}[/bold] · effective "
            f"[bold]{check.effective}[/bold]"
            + (f" (overridden by {check.override.principal})" if check.override else ""),
            highlight=False,
        )
        for reason in check.reasons:
            out.print(f"  recorded reason {reason.rule}: {reason.message}", highlight=False)
    raise typer.Exit(0 if check.effective == "pass" else EXIT_GATE_FAILED)


@app.command("gate")
def gate_command(
    suite: Annotated[
        str | None, typer.Argument(help="Suite file, or a published NAME[@VERSION].")
    ] = None,
    outputs: Annotated[
        str | None, typer.Option("--outputs", help="JSONL file, folder or s3:// prefix.")
    ] = None,
    subject: Annotated[
        str | None, typer.Option("--subject", help="KIND:ID[@VARIANT], e.g. agent:bot@v2.")
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="RUN_ID to compare with (default: pinned, else latest)."),
    ] = None,
    sample: Annotated[
        int | None, typer.Option("--sample", help="Score only N cases, chosen by --seed.")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed for --sample.")] = 0,
    junit: Annotated[
        Path | None, typer.Option("--junit", help="Write JUnit XML here (cases + gate rules).")
    ] = None,
    check: Annotated[
        str | None,
        typer.Option("--check", help="Re-check a past gate run's effective verdict instead."),
    ] = None,
    judge_block: JudgeBlockOption = None,
    store: StoreOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the suite, then fail (exit 1) on regression, low pass rate, an uncalibrated judge or
    a blocked budget; exit 0 otherwise."""
    if check is not None:
        _check(check, store, as_json)
    if suite is None or outputs is None:
        fail("assay gate needs SUITE and --outputs (or --check RUN_ID)")
    if sample is not None and sample < 1:
        fail("--sample must be at least 1")
    evidence = open_evidence(store)
    ref = resolve_suite_arg(evidence, suite)
    who = guarded(lambda: Subject.given_or_default(subject, outputs))
    prefect_defaults()
    from prefect import tags

    from flows.gate import gate

    name = registry.parse_ref(ref)[0]
    with tags("assay", "gate", f"suite:{name}", f"subject:{who}"), progress_bar(not as_json):
        run: GateRun = guarded(
            lambda: gate(
                suite=ref,
                outputs=outputs,
                subject=str(who),
                sample=sample,
                seed=seed,
                store=evidence.uri,
                baseline=baseline,
                judge_block=judge_block,
            )
        )
    if junit is not None:
        cases = list(read_cases(evidence, run.decision.run_id))
        junit.write_text(junit_xml(run.decision, cases), encoding="utf-8")
    if as_json:
        print_json(_gate_json(run))
    else:
        print_result(run.result)
        _print_decision(run.decision)
    raise typer.Exit(0 if run.decision.verdict == "pass" else EXIT_GATE_FAILED)
