"""`assay label` (a guided labelling session) and `assay calibrate` (the judge against people).

`assay label` shows each judged case (input, expected, rubric, output) and asks pass / fail /
skip / quit; every answer is appended to the set at once, so quitting or a crash loses nothing
and the next session resumes after the last label. `assay calibrate` measures the configured judge
against the set in the calibration flow; exit 0 when the judge is calibrated, 1 when not, 2 on
usage and input errors.

The calibration package and Rich's Markdown are imported inside the commands, so that other
commands and `assay --help` do not build their models (about 40 ms).
"""

from __future__ import annotations

import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.panel import Panel
from rich.prompt import Prompt
from rich.text import Text

from assay.cli import _common as common
from assay.judge import judge_skip_reason
from assay.judge.endpoint import check_judge_environment
from assay.suites import registry

if TYPE_CHECKING:
    from assay.calibration.labels import Label, LabelTask
    from assay.calibration.report import CalibrationReport

EXIT_UNCALIBRATED = 1
ANSWERS: dict[str, Label] = {"p": "pass", "f": "fail"}


def _show(task: LabelTask, number: int) -> None:
    common.out.rule(Text(f"item {number} · {task.item_id}"))
    fields = [("input", task.input), ("expected", task.expected), ("rubric", task.rubric)]
    for title, value in [*fields, ("output", task.output)]:
        if value:
            # Text, never markup: the labeller must see exactly what the judge will see
            # (an output holding `[/INST]` or `[red]` is shown as written).
            common.out.print(Panel(Text(value), title=title, title_align="left"), highlight=False)


@common.app.command("label")
def label_command(
    suite: Annotated[str, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")],
    outputs: Annotated[str, typer.Option("--outputs", help="Outputs to label (JSONL/folder).")],
    into: Annotated[Path, typer.Option("--into", help="Calibration set (JSONL) to append to.")],
    labeler: Annotated[
        str | None, typer.Option("--labeler", help="Who is labelling (default: $USER).")
    ] = None,
    store: common.StoreOption = None,
) -> None:
    """Label the suite's judged cases pass/fail by hand, appending to a calibration set.

    The set stores the case and the output text: labelling is the operator's opt-in to keep
    them (each field clamped to 4,000 characters). Resumes where the last session stopped.
    """
    from assay.calibration.labels import append_item, load_set, tasks_to_label

    evidence = common.open_evidence(store)
    ref = common.resolve_suite_arg(evidence, suite)
    _, golden = common.guarded(lambda: registry.resolve(evidence, ref))
    done = (
        {item.item_id for item in common.guarded(lambda: load_set(into))}
        if into.exists()
        else set()
    )
    who = labeler or os.environ.get("USER") or getpass.getuser()
    pending = common.guarded(lambda: list(tasks_to_label(golden, outputs, done)))
    common.out.print(
        f"[bold]{ref}[/bold]: {len(pending)} item(s) to label, {len(done)} already in {into}. "
        "Answer p(ass), f(ail), s(kip) or q(uit).",
        highlight=False,
    )
    labelled = 0
    for number, task in enumerate(pending, start=1):
        _show(task, number)
        answer = Prompt.ask("label", choices=["p", "f", "s", "q"], console=common.out)
        if answer == "q":
            break
        if answer == "s":
            continue
        append_item(into, task.labelled(ANSWERS[answer], who))
        labelled += 1
    common.out.print(
        f"Labelled {labelled} item(s); the set holds {len(done) + labelled}.", highlight=False
    )


@common.app.command("calibrate")
def calibrate_command(
    calibration_set: Annotated[Path, typer.Argument(help="Calibration set (JSONL).")],
    judge_block: common.JudgeBlockOption = None,
    fresh_judge: common.FreshJudgeOption = False,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Measure the configured judge against the human labels; exit 1 unless it is calibrated."""
    from rich.markdown import Markdown

    from assay.calibration.labels import load_set
    from assay.calibration.options import CalibrationOptions
    from assay.calibration.render import markdown_report

    evidence = common.open_evidence(store)
    common.guarded(lambda: load_set(calibration_set))
    missing = None if judge_block else judge_skip_reason()
    if missing is not None:
        common.fail(f"{missing}: set ASSAY_JUDGE_MODEL and OPENAI_API_KEY, or pass --judge-block")
    if not judge_block:
        common.guarded(check_judge_environment)
    report: CalibrationReport = common.run_flow(
        "calibration",
        ("calibration",),
        quiet=as_json,
        options=CalibrationOptions(
            calibration_set=str(calibration_set),
            store=evidence.uri,
            judge_block=judge_block,
            fresh_judge=fresh_judge,
        ),
    )
    if as_json:
        common.print_json(report.model_dump(mode="json"))
    else:
        common.out.print(Markdown(markdown_report(report)))
    raise typer.Exit(0 if report.passed else EXIT_UNCALIBRATED)
