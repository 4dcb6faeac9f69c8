"""`assay gate`: run a suite and turn the result into a CI exit code, JUnit XML and evidence.

Exit codes: 0 when the verdict is pass; 1 when the gate fails, with every reason listed; 2 on
usage and input errors. `assay gate --check RUN_ID` re-checks a past gate run and exits 0 only
when its effective verdict (after any governed override) is pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, cast

import typer
from rich.text import Text

from assay.cli import _common as common
from assay.cli._plan import show_plan
from assay.cli._run_flags import RunFlags, run_option_flags, run_options
from assay.cli.runs import launch_suite_flow, print_result
from assay.runs.options import GateOptions

if TYPE_CHECKING:
    from assay.gate.decision import GateDecision, GateReport, GateVerdict
    from assay.outputs.reference import OutputsReference

EXIT_GATE_FAILED = 1

SuiteArgument = Annotated[
    str | None, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")
]
JunitOption = Annotated[
    Path | None,
    typer.Option(
        "--junit",
        help="Write JUnit XML here (cases + gate rules). A path that cannot be written is a "
        "warning, never the exit code.",
    ),
]
CommentOption = Annotated[
    Path | None,
    typer.Option(
        "--comment",
        help="Write the pull-request comment (markdown) here; `assay github comment` posts "
        "it. A path that cannot be written is a warning, never the exit code.",
    ),
]
ReportUrlOption = Annotated[
    str | None,
    typer.Option(
        "--report-url",
        envvar="ASSAY_URL",
        help="The Assay service's URL: the comment links its /runs/{id}/report.",
    ),
]
CheckOption = Annotated[
    str | None,
    typer.Option(
        "--check",
        help="Re-check a past gate run's effective verdict instead.",
        callback=common.checked_run_id,
    ),
]
PassThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--pass-threshold",
        min=0.0,
        max=1.0,
        help="With --check: what-if — the decision at this pass threshold (nothing recorded,"
        " no judge call).",
    ),
]
MinCoverageOption = Annotated[
    float | None,
    typer.Option(
        "--min-coverage", min=0.0, max=1.0, help="With --pass-threshold: what-if coverage."
    ),
]
AllowInsufficientOption = Annotated[
    bool,
    typer.Option(
        "--allow-insufficient",
        help="Exit 0 when the only failed rule is insufficient_evidence (non-inferiority).",
    ),
]


@dataclass(frozen=True)
class Answer:
    """How the gate answers, wherever it ran: the comment file, the report link, JSON or text,
    and whether insufficient evidence passes."""

    comment: Path | None
    report_url: str | None
    as_json: bool
    allow_insufficient: bool


def _exit_code(verdict: GateVerdict, allow_insufficient: bool) -> int:
    from assay.gate.decision import INSUFFICIENT

    passing = verdict == "pass" or (allow_insufficient and verdict == INSUFFICIENT)
    return 0 if passing else EXIT_GATE_FAILED


RULE_VERDICTS: dict[str, tuple[str, str]] = {
    "regressed": ("no regression", "regressed"),
    "coverage": ("coverage met", "coverage below minimum"),
    "pass_rate_below_threshold": ("pass rate met", "pass rate below threshold"),
    "judge_uncalibrated": ("judge calibration", "judge uncalibrated"),
    "judge_not_admitted": ("judge admitted", "judge not admitted"),
    "judge_unavailable": ("judge available", "judge unavailable"),
    "budget_blocked": ("within budget", "budget blocked"),
    "judge_flip_rate": ("judge flip rate within limit", "judge flip rate too high"),
    "insufficient_evidence": ("non-inferior", "insufficient evidence"),
}
"""Each gate rule (named after how it fails) as the verdict a person reads: (passed, failed)."""


def _print_decision(decision: GateDecision | GateReport) -> None:
    from assay.gate.decision import GateDecision

    for rule in decision.rules:
        passed, failed = RULE_VERDICTS.get(rule.rule, (rule.rule, rule.rule))
        line = f"[green]pass[/green]  {passed}" if rule.passed else f"[red]FAIL[/red]  {failed}"
        common.out.print(f"  {line} ({rule.detail})", highlight=False)
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
    thresholds: tuple[float, float | None, float | None],
    answer: Answer,
) -> NoReturn:
    from assay.gate.decision import what_if

    pass_threshold, min_coverage, max_flip_rate = thresholds
    decision: GateDecision = common.guarded(
        lambda: what_if(
            common.open_evidence(store), run_id, pass_threshold, min_coverage, max_flip_rate
        )
    )
    if answer.as_json:
        common.print_json(decision.model_dump(mode="json"))
    else:
        _print_decision(decision)
    raise typer.Exit(_exit_code(decision.verdict, answer.allow_insufficient))


def _check(
    run_id: str, store: str | None, endpoint: common.Endpoint | None, answer: Answer
) -> NoReturn:
    if endpoint is not None:
        from assay.cli import remote

        check = remote.gate_check(endpoint, run_id)
    else:
        from assay.gate.overrides import check_gate

        check = common.guarded(lambda: check_gate(common.open_evidence(store), run_id))
    if answer.as_json:
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
    raise typer.Exit(_exit_code(check.effective, answer.allow_insufficient))


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
    report: GateReport, decision: GateDecision | GateReport, answer: Answer
) -> NoReturn:
    """A gate's answer, whether it ran here or in the service: the pull-request comment (with
    `--comment`), the report or its JSON, and the exit code of its verdict."""
    if answer.comment is not None:
        from assay.gate.comment import gate_comment

        text = gate_comment(report, answer.report_url)
        _write_aside(answer.comment, text, "pull-request comment")
    if answer.as_json:
        common.print_json(report.model_dump(mode="json"))
    else:
        print_result(report.result)
        _print_decision(decision)
    raise typer.Exit(_exit_code(report.verdict, answer.allow_insufficient))


@common.app.command("gate")
@run_option_flags(GateOptions)
def gate_command(
    options: dict[str, Any],
    flags: RunFlags,
    suite: SuiteArgument = None,
    outputs: Annotated[str | None, common.OUTPUTS_FLAG] = None,
    junit: JunitOption = None,
    comment: CommentOption = None,
    report_url: ReportUrlOption = None,
    check: CheckOption = None,
    pass_threshold: PassThresholdOption = None,
    min_coverage: MinCoverageOption = None,
    allow_insufficient: AllowInsufficientOption = False,
) -> None:
    """Run the suite, then fail (exit 1) on regression, low pass rate, an uncalibrated judge or
    a blocked budget; exit 0 otherwise."""
    endpoint = flags.endpoint(options["store"])
    answer = Answer(comment, report_url, flags.as_json, allow_insufficient)
    if check is not None or pass_threshold is not None or min_coverage is not None:
        _past_gate(check, (pass_threshold, min_coverage), options, endpoint, answer)
    if suite is None or outputs is None:
        common.fail("assay gate needs SUITE and --outputs (or --check RUN_ID)")
    reference = flags.reference(outputs)
    if flags.plan:
        show_plan(GateOptions, suite, reference, options, endpoint, flags.as_json)
    if endpoint is not None:
        _gate_through(endpoint, suite, reference, options, answer, resume=flags.resume, junit=junit)
    chosen = run_options(GateOptions, **flags.chosen(options, suite, reference))
    _gate_here(chosen, junit, answer)


def _gate_through(
    endpoint: common.Endpoint,
    suite: str,
    reference: OutputsReference,
    options: dict[str, Any],
    answer: Answer,
    **here_only: object,
) -> None:
    """The gate through the service, and its answer; returns only when the local service
    cannot take this run (it runs here then)."""
    from assay.cli import remote

    sent = remote.sendable(endpoint, GateOptions, options, reference, **here_only)
    if sent is not None:
        report = remote.gate(endpoint, suite, reference, sent)
        if not answer.as_json:
            endpoint.announce(report.run_id)
        _gate_answer(report, report, answer)


def _past_gate(
    check: str | None,
    what_if: tuple[float | None, float | None],
    options: dict[str, Any],
    endpoint: common.Endpoint | None,
    answer: Answer,
) -> NoReturn:
    """`--check RUN_ID`, or its what-if at other thresholds (`--pass-threshold`)."""
    pass_threshold, min_coverage = what_if
    if min_coverage is not None and pass_threshold is None:
        common.fail("--min-coverage is a what-if option: use it with --check and --pass-threshold")
    if check is None:
        common.fail("--pass-threshold is a what-if: use it with --check RUN_ID")
    if pass_threshold is None:
        _check(check, options["store"], endpoint, answer)
    thresholds = (pass_threshold, min_coverage, options["max_judge_flip_rate"])
    _what_if(check, options["store"], thresholds, answer)


def _gate_here(options: GateOptions, junit: Path | None, answer: Answer) -> NoReturn:
    """The gate in this process: its flow run, JUnit XML with `--junit`, then the answer."""
    from assay.gate.decision import GateReport, GateRun
    from assay.reports.link_key import report_link_key

    evidence, launched = launch_suite_flow("gate", ("gate",), not answer.as_json, options)
    run = cast(GateRun, launched)
    if junit is not None:
        from assay.gate.junit import junit_xml
        from assay.runs.chunks import read_decided_cases

        cases = read_decided_cases(evidence, run.decision.run_id)
        _write_aside(junit, junit_xml(run.decision, cases), "JUnit XML")
    link_key = report_link_key(evidence, run.decision.run_id)
    _gate_answer(GateReport.of(run, link_key), run.decision, answer)
