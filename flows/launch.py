"""The one launcher of Assay's flows: the command line (`assay/cli/`) and the service
(`assay/api/`) start every flow run here, and keep no launch code of their own.

A suite run or a gate (`launch`) is prepared once before any flow run exists
(`assay.runs.pipeline.prepare_run`: the suite resolved once, the outputs validated once and their
index kept for the flow's ingest, the Dask cluster its options name probed), then run in this
process — its chunks on the runner its options name (`flows.runners`) — and its result comes
back typed, whatever its verdict: a negative verdict
ends the flow run Failed (`tasks.verdicts`) and is still the run's recorded result, returned here.
The CLI prepares a run itself when it must answer bad input before Prefect is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from importlib import import_module
from typing import Any, Literal
from uuid import UUID

from prefect import tags
from prefect.client.schemas.objects import State

from assay.gate.decision import GateRun
from assay.runs.options import GateOptions, RunOptions
from assay.runs.pipeline import PreparedRun, prepare_run
from assay.runs.records import EvalResult
from assay.store import EvidenceStore
from blocks.judge_settings import JudgeSettings
from flows.local import crash_flow_run, in_this_process
from flows.runners import api_for_workers, reachable_chunk_runner
from tasks._store import evidence_store, store_reference
from tasks.verdicts import Listener, told_when_recorded, verdict_result

__all__ = ["crash_flow_run", "in_this_process", "launch", "start"]

SuiteFlow = Literal["suite_run", "gate"]
Announce = Callable[[UUID | None, bool], None]
"""Told a flow run's id once it ended, and whether it ended with a result (the CLI prints its UI
link)."""


def launch(
    run: RunOptions | PreparedRun,
    flow: SuiteFlow = "suite_run",
    *,
    store: EvidenceStore | None = None,
    labels: Sequence[str] = (),
    announce: Announce | None = None,
    suite_files: bool = True,
    recorded: Listener | None = None,
) -> EvalResult | GateRun:
    """Run the suite-run flow (or the gate, with `GateOptions`) in this process; blocks until
    it ends and returns its result, a negative verdict's included; raises what the flow raised.

    Args:
        run: The run's options (prepared here), or a run the caller prepared already.
        flow: `suite_run` or `gate`.
        store: The evidence store the options name, when the caller opened it already.
        labels: Tags besides `assay`, the suite's and the subject's.
        announce: Told the flow run's id when it ends.
        suite_files: Whether the suite may be a file to publish (see `prepare_run`).
        recorded: Given the result as soon as the flow has recorded it, before it publishes
            its artifacts and report.
    """
    if (run if isinstance(run, RunOptions) else run.options).judge_block is None:
        JudgeSettings.from_env()  # a judge variable out of bounds: one InputError, before any run
    if isinstance(run, RunOptions):
        evidence = store or evidence_store(store_reference(run.store, run.storage_block))
        run = prepare_run(evidence, run, suite_files=suite_files)
    options = run.options
    if flow == "gate" and not isinstance(options, GateOptions):
        options = GateOptions.model_validate(options.model_dump())
    runner = reachable_chunk_runner(options.dask, options.workers)
    # A temporary cluster's scheduler lives in this process and logs every worker's coming
    # and going at INFO through Prefect's console handler; a terminal wants warnings only.
    logging.getLogger("distributed").setLevel(logging.WARNING)
    listening = told_when_recorded(flow, recorded) if recorded is not None else nullcontext()
    with listening, api_for_workers(runner):
        result: EvalResult | GateRun = start(
            flow, ("assay", *labels, *run.labels), announce=announce, options=options
        )
    return result


def start(
    name: str, labels: Sequence[str], *, announce: Announce | None = None, **parameters: Any
) -> Any:
    """Run `flows.<name>` in this process, tagged `labels`, and return its result.

    A negative verdict's Failed state still holds the result, which is returned; a failure that
    is not a verdict (an exception, a crash) is raised.
    """
    flow = getattr(import_module(f"flows.{name}"), name)
    with tags(*labels), in_this_process():
        state: State[Any] = flow(**parameters, return_state=True)
    try:
        result = verdict_result(state)
    except BaseException:
        if announce is not None:
            announce(state.state_details.flow_run_id, False)
        raise
    if announce is not None:
        announce(state.state_details.flow_run_id, True)
    return result
