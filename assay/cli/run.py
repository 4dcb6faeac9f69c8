"""`assay run`: score outputs against a suite in the suite-run flow (here, or through the
Assay service), with a flag for every run option (`assay.cli._run_flags`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from assay.cli import _common as common
from assay.cli._commands import DEFAULT_CASE_ATTRIBUTE
from assay.cli._plan import PlanOption, show_plan
from assay.cli._run_flags import run_option_flags, run_options
from assay.cli.runs import execute_run, print_shown
from assay.runs.options import RunOptions


@common.app.command("run")
@run_option_flags(RunOptions)
def run(
    suite: Annotated[str, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")],
    outputs: common.OutputsOption,
    options: dict[str, Any],
    outputs_format: common.OutputsFormatOption = "auto",
    case_attribute: common.CaseAttributeOption = DEFAULT_CASE_ATTRIBUTE,
    resume: common.ResumeOption = None,
    as_json: common.JsonOption = False,
    server: common.ServerOption = None,
    local: common.LocalOption = False,
    plan: PlanOption = False,
) -> None:
    """Score outputs against a suite in a Prefect flow and record the evidence — through the
    Assay service when one is up (`assay server start`, or --server / $ASSAY_URL)."""
    reference = common.outputs_reference(outputs, outputs_format, case_attribute)
    endpoint = common.service(server, options["store"], local=local, start=not plan)
    if plan:
        show_plan(RunOptions, suite, reference, options, endpoint, as_json)
    if endpoint is not None:
        from assay.cli import remote

        sent = remote.sendable(endpoint, RunOptions, options, reference, resume=resume)
        if sent is not None:
            served = remote.run(endpoint, suite, reference, sent)
            print_shown(served, as_json)
            if not as_json:
                endpoint.announce(served.run_id)
            return
    given = dict(options, suite=suite, outputs=reference, run_id=resume, resume=bool(resume))
    result = execute_run(run_options(RunOptions, **given), show_progress=not as_json)
    print_shown(result, as_json)
