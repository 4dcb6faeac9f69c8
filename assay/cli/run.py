"""`assay run`: score outputs against a suite in the suite-run flow (here, or through the
Assay service), with a flag for every run option (`assay.cli._run_flags`)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from assay.cli import _common as common
from assay.cli._plan import show_plan
from assay.cli._run_flags import RunFlags, run_option_flags, run_options
from assay.cli.runs import execute_run, print_shown
from assay.runs.options import RunOptions


@common.app.command("run")
@run_option_flags(RunOptions)
def run(
    suite: Annotated[str, typer.Argument(help="Suite file, or a published NAME\\[@VERSION].")],
    outputs: common.OutputsOption,
    options: dict[str, Any],
    flags: RunFlags,
) -> None:
    """Score outputs against a suite in a Prefect flow and record the evidence — through the
    Assay service when one is up (`assay server start`, or --server / $ASSAY_URL)."""
    reference = flags.reference(outputs)
    endpoint = flags.endpoint(options["store"])
    if flags.plan:
        show_plan(RunOptions, suite, reference, options, endpoint, flags.as_json)
    if endpoint is not None:
        from assay.cli import remote

        sent = remote.sendable(endpoint, RunOptions, options, reference, resume=flags.resume)
        if sent is not None:
            served = remote.run(endpoint, suite, reference, sent)
            print_shown(served, flags.as_json)
            if not flags.as_json:
                endpoint.announce(served.run_id)
            return
    chosen = run_options(RunOptions, **flags.chosen(options, suite, reference))
    print_shown(execute_run(chosen, show_progress=not flags.as_json), flags.as_json)
