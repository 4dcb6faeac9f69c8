"""`assay judge admit`: whether the configured judge may gate (docs/admission.md).

Runs calibration (or reads the judge's latest report), the bias battery shipped with Assay and
the injection canaries with the configured judge, in this process (no flow: a handful of calls),
and appends an admission record; exit 0 when the judge is admitted, 1 when not, 2 on usage and
input errors. The gate's `judge_not_admitted` rule reads the latest record.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from assay.cli import _common as common

EXIT_NOT_ADMITTED = 1

judge_app = typer.Typer(help="Admit a judge before its verdicts may gate.", no_args_is_help=True)
common.app.add_typer(judge_app, name="judge")


@judge_app.command("admit")
def admit_command(
    judge_block: common.JudgeBlockOption = None,
    battery: Annotated[
        str, typer.Option("--battery", help="The bias battery shipped with Assay to run.")
    ] = "default",
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration", help="Calibrate against this set first (else: the latest report)."
        ),
    ] = None,
    subject_model: Annotated[
        str | None,
        typer.Option("--subject-model", help="The model the judged subject runs (declared)."),
    ] = None,
    allow_self_judging: Annotated[
        bool,
        typer.Option(
            "--allow-self-judging",
            help="Admit a judge whose model is the subject's own (recorded).",
        ),
    ] = False,
    fresh_judge: common.FreshJudgeOption = False,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Run calibration, the bias battery and the injection canaries; exit 1 unless admitted."""
    from assay.admission.admit import AdmissionAsk, admit
    from assay.admission.battery import load_battery
    from assay.admission.record import summary
    from assay.calibration.labels import load_set
    from assay.judge import judge_skip_reason
    from assay.judge.endpoint import check_judge_environment
    from blocks.judge_settings import judge_setup

    evidence = common.open_evidence(store)
    loaded = common.guarded(lambda: load_battery(battery))
    if calibration is not None:
        common.guarded(lambda: load_set(calibration))
    missing = None if judge_block else judge_skip_reason()
    if missing is not None:
        common.fail(f"{missing}: set ASSAY_JUDGE_MODEL and OPENAI_API_KEY, or pass --judge-block")
    if not judge_block:
        common.guarded(check_judge_environment)
    common.prefect_defaults()  # the judge block and the budgets live in Prefect
    setup = common.guarded(lambda: judge_setup(judge_block, fresh_judge))
    ask = AdmissionAsk(
        admission_id=f"admit-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:8]}",
        calibration_set=None if calibration is None else str(calibration),
        subject_model=subject_model,
        allow_self_judging=allow_self_judging,
    )
    record = common.guarded(lambda: admit(evidence, setup, loaded, ask))
    if as_json:
        common.print_json(record.model_dump(mode="json"))
    else:
        pin = record.fingerprint.judge
        common.out.print(
            f"{pin.model} · {pin.prompt_version} · battery {loaded.version}: {summary(record)}",
            highlight=False,
        )
    raise typer.Exit(0 if record.admitted else EXIT_NOT_ADMITTED)
