"""The one launcher of Assay's flows: the command line (`assay/cli/`) and the service
(`assay/api/`) start every flow run here, and keep no launch code of their own.

A suite run or a gate (`launch`) is prepared once before any flow run exists
(`assay.runs.pipeline.prepare_run`: the suite resolved once, the outputs validated once and their
index kept for the flow's ingest), then run in this process, on the chunk runner its options
name (`flows.runners`), and its result comes back typed, whatever its verdict: a negative verdict
ends the flow run Failed (`tasks.verdicts`) and is still the run's recorded result, returned here.
The CLI prepares a run itself when it must answer bad input before Prefect is imported.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from importlib import import_module
from typing import Any, Literal, overload
from uuid import UUID

from prefect import tags
from prefect.client.schemas.objects import State
from prefect.context import TagsContext

from assay.gate.decision import GateRun
from assay.runs.options import GateOptions, RunOptions
from assay.runs.pipeline import PreparedRun, prepare_run
from assay.runs.records import EvalResult
from assay.store import EvidenceStore
from flows.local import crash_flow_run, in_this_process
from flows.runners import api_for_workers, reachable_chunk_runner
from tasks._store import evidence_store, store_reference
from tasks.verdicts import Listener, told_when_recorded, verdict_result

__all__ = ["crash_flow_run", "launch", "start", "untagged_tasks"]

SuiteFlow = Literal["suite_run", "gate"]
Announce = Callable[[UUID | None, bool], None]
"""Told a flow run's id once it ended, and whether it ended with a result (the CLI prints its UI
link)."""


@overload
def launch(
    run: GateOptions | PreparedRun,
    flow: Literal["gate"],
    *,
    store: EvidenceStore | None = None,
    labels: Sequence[str] = (),
    announce: Announce | None = None,
    suite_files: bool = True,
    recorded: Listener | None = None,
) -> GateRun: ...


@overload
def launch(
    run: RunOptions | PreparedRun,
    flow: Literal["suite_run"] = "suite_run",
    *,
    store: EvidenceStore | None = None,
    labels: Sequence[str] = (),
    announce: Announce | None = None,
    suite_files: bool = True,
    recorded: Listener | None = None,
) -> EvalResult: ...


@overload
def launch(
    run: RunOptions | PreparedRun,
    flow: SuiteFlow,
    *,
    store: EvidenceStore | None = None,
    labels: Sequence[str] = (),
    announce: Announce | None = None,
    suite_files: bool = True,
    recorded: Listener | None = None,
) -> EvalResult | GateRun: ...


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
    with listening:
        result: EvalResult | GateRun = start(
            flow,
            ("assay", *labels, *run.labels),
            announce=announce,
            task_runner=runner,
            options=options,
        )
    return result


def start(
    name: str,
    labels: Sequence[str],
    *,
    announce: Announce | None = None,
    task_runner: Any = None,
    **parameters: Any,
) -> Any:
    """Run `flows.<name>` in this process, tagged `labels`, and return its result.

    `task_runner` replaces the suite run's own for this run (its chunks on Dask). A negative
    verdict's Failed state still holds the result, which is returned; a failure that is not a
    verdict (an exception, a crash) is raised.
    """
    flow = getattr(import_module(f"flows.{name}"), name)
    # A runner equal to the flow's own (the default thread pool) needs no new Flow: building one
    # is ~12 ms of a 10-case service run, and every run duplicates its runner anyway.
    if task_runner is not None and name == "suite_run" and task_runner != flow.task_runner:
        flow = flow.with_options(task_runner=task_runner)
    on_workers = api_for_workers(task_runner) if task_runner is not None else nullcontext()
    with tags(*labels), on_workers, in_this_process():
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


@contextmanager
def untagged_tasks() -> Iterator[None]:
    """Task runs started inside this block take none of the launcher's tags (`start`): the tags
    belong to the flow run. Prefect asks its API for a tag's concurrency slots before every
    tagged task run — a lease written to its database that, on SQLite, collides with other runs'
    writes (a 503, then 2 s of client back-off: every other 10-case service run took 2.2 s
    instead of 0.25; bench/README.md)."""
    with TagsContext(current_tags=set()):
        yield
