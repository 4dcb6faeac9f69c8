"""The conventions every Assay flow keeps, applied by one decorator, `assay_flow`, so that a new
flow cannot forget one (`tests/test_flow_conventions.py` fails on a flow built without it).

A flow built with `assay_flow`:
- takes one parameter, `options`, a pydantic model of the feature's (its fields' descriptions
  are the parameters' one text), and its run is named from the options Prefect validated;
- runs its body with untagged task runs (`untagged_tasks`): the launcher's tags
  belong to the flow run, and to the subflows it runs through `run_subflow` (a flow calling
  another directly is an error, since that subflow run would go untagged);
- tells whoever launched it its result once its records are complete (`tasks.verdicts.recorded`):
  when the body calls `tell_caller`, before it publishes, or else as soon as the body returns;
- ends in its verdict's state (`tasks.verdicts.verdict_state`: Completed or Failed, holding the
  result) when it has a verdict;
- publishes a suite run's report through `publish_run_report`, which leaves it to the flow that
  called this one when that flow publishes its subflows' reports (the gate: the page shows its
  decision), so the report is written once.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast, get_type_hints

from prefect import Flow, flow
from prefect.client.schemas.objects import State
from prefect.context import TagsContext
from prefect.runtime import flow_run
from prefect.settings import get_current_settings
from pydantic import BaseModel

from assay.verdicts import FlowVerdict
from tasks.reports import publish_report
from tasks.verdicts import recorded, verdict_state

OptionsT = TypeVar("OptionsT", bound=BaseModel)
ResultT = TypeVar("ResultT")


@dataclass
class _Running:
    """An Assay flow whose body runs in this context."""

    flow: str
    """Its function's name, as the launcher names it (`told_when_recorded`)."""
    tags: frozenset[str]
    """Its flow run's tags, which the subflows it runs take too."""
    report_left_to_caller: bool
    publishes_subflow_reports: bool
    told: bool = False
    starting_subflow: bool = False


_running: ContextVar[_Running | None] = ContextVar("assay_running_flow", default=None)
"""The innermost Assay flow running in this context: a subflow called in-process runs its body
in its caller's thread and context."""


def assay_flow(
    *,
    run_name: Callable[[OptionsT], str],
    verdict: Callable[[ResultT], FlowVerdict] | None,
    publishes_subflow_reports: bool = False,
) -> Callable[[Callable[[OptionsT], ResultT]], Flow[[OptionsT], ResultT]]:
    """Build an Assay flow from its body, `def NAME(options: SomeOptions) -> Result`.

    Args:
        run_name: The flow run's name, from its validated options.
        verdict: The flow's verdict on its result, its run's final state (None: a flow without
            a verdict, Completed whenever it returns).
        publishes_subflow_reports: Whether the suite runs this flow calls leave their report to
            it (`publish_run_report`).

    The flow is named like its function, `_` as `-` (`suite_run` → `suite-run`).
    """

    def build(body: Callable[[OptionsT], ResultT]) -> Flow[[OptionsT], ResultT]:
        model = _options_model(body)

        @functools.wraps(body)
        def run(options: OptionsT) -> ResultT:
            with _running_as(body.__name__, publishes_subflow_reports) as running:
                result = body(options)
                if not running.told:
                    tell_caller(result)
            return result if verdict is None else verdict_state(verdict(result), result)

        # Prefect builds the parameters' model from the signature and resolves its names in the
        # wrapper's module, which does not import the options model: hand it resolved.
        run.__signature__ = inspect.signature(body, eval_str=True)  # type: ignore[attr-defined]

        def name_run() -> str:
            given = flow_run.parameters["options"]
            return run_name(model.model_validate(given, from_attributes=True))

        built: Flow[[OptionsT], ResultT] = flow(
            name=body.__name__.replace("_", "-"),
            flow_run_name=name_run,
            persist_result=False,
            # Nothing is ever written there (no flow or task persists its result); naming it
            # spares Prefect asking its server for a default result storage, twice before every
            # flow run starts (`GET /admin/storage`).
            result_storage=Path(get_current_settings().results.local_storage_path),
            log_prints=False,
        )(run)
        return built

    return build


@contextmanager
def _running_as(name: str, publishes_subflow_reports: bool) -> Iterator[_Running]:
    """The body of the Assay flow `name` runs in this block, with untagged task runs; yields
    what it records of the run (whether the caller was told).

    A module-level function, not code in `assay_flow`'s wrapper: a Dask worker gets the flow run's
    context pickled with the wrapper by value, and a `ContextVar` it named cannot be pickled."""
    caller = _running.get()
    if caller is not None and not caller.starting_subflow:
        raise RuntimeError(
            f"flow {caller.flow} runs {name} directly: call run_subflow, so that the subflow run "
            "is tagged like its caller"
        )
    running = _Running(
        flow=name,
        tags=frozenset(TagsContext.get().current_tags),
        report_left_to_caller=caller is not None and caller.publishes_subflow_reports,
        publishes_subflow_reports=publishes_subflow_reports,
    )
    token = _running.set(running)
    try:
        with untagged_tasks():  # the flow run carries the tags
            yield running
    finally:
        _running.reset(token)


def _options_model(body: Callable[[OptionsT], Any]) -> type[OptionsT]:
    """The options model that is a flow body's one parameter."""
    model = get_type_hints(body).get("options")
    if list(inspect.signature(body).parameters) != ["options"] or not (
        isinstance(model, type) and issubclass(model, BaseModel)
    ):
        raise TypeError(
            f"flow {body.__name__}: an Assay flow takes one parameter, `options`, a pydantic model"
        )
    return cast(type[OptionsT], model)


def _current() -> _Running:
    running = _running.get()
    if running is None:
        raise RuntimeError("only the body of a flow built with assay_flow can call this")
    return running


def tell_caller(result: object) -> None:
    """The records are complete: tell whoever launched this flow its result now, before the
    body publishes its artifacts and report (a body that does not call it tells when it
    returns)."""
    running = _current()
    running.told = True
    recorded(running.flow, result)


def run_subflow(subflow: Flow[[OptionsT], ResultT], options: OptionsT) -> State[ResultT]:
    """Run another Assay flow as a subflow of this one; returns its final state, a negative
    verdict's included (`tasks.verdicts.verdict_result` reads its result). The subflow run is
    tagged like this flow run, though the body around it runs with untagged task runs."""
    running = _current()
    running.starting_subflow = True
    try:
        with TagsContext(current_tags=set(running.tags)):
            return subflow(options, return_state=True)
    finally:
        running.starting_subflow = False


def publish_run_report(store: str, run_id: str) -> str | None:
    """Publish a suite run's report (`tasks.reports.publish_report`), unless the flow that
    called this one publishes it; returns its link, if published here."""
    if _current().report_left_to_caller:
        return None
    return publish_report(store, run_id)


@contextmanager
def untagged_tasks() -> Iterator[None]:
    """Task runs started inside this block take none of the launcher's tags (`start`): the tags
    belong to the flow run. Prefect asks its API for a tag's concurrency slots before every
    tagged task run — a lease written to its database that, on SQLite, collides with other runs'
    writes (a 503, then 2 s of client back-off: every other 10-case service run took 2.2 s
    instead of 0.25; bench/README.md)."""
    with TagsContext(current_tags=set()):
        yield
