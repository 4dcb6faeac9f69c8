"""A flow's verdict as its final Prefect state, named for the verdict (see `assay.verdicts`) and
logged to the run's Logs tab: Completed when it is positive (`Passed`), Failed when it is
negative (`Regressed`, `Not passed`, `Gate failed`, …) — red in the UI, counted on the
Dashboard, and what Prefect's automations and notifications trigger on.

A negative verdict is still a result: the Failed state holds it, and whoever ran the flow reads it
back with `verdict_result` (the launcher, a parent flow). It is also final: the Prefect server
turns a proposed Failed state into `AwaitingRetry` while the run has flow retries left (its
`RetryFailedFlows` rule, measured: the retry re-ran the flow and ended Completed), so a negative
verdict first sets the run's retries to 0 — flow retries are for crashes, never for a verdict.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.context import FlowRunContext
from prefect.states import Completed, Failed

from assay.verdicts import FlowVerdict
from tasks._log import run_log

T = TypeVar("T")


def verdict_state(verdict: FlowVerdict, result: T) -> T:
    """Return this from a flow: its run ends with `verdict`'s name and message, Completed or
    Failed, holding `result`.

    Prefect hands a returned State's data to whoever called the flow (a CLI command, a parent
    flow), so callers still get `result`; the cast says so to the type checker.
    """
    run_log().info("verdict: %s (%s)", verdict.name, verdict.message)
    if verdict.passed:
        return cast(T, Completed(name=verdict.name, message=verdict.message, data=result))
    _no_retries()
    return cast(T, Failed(name=verdict.name, message=verdict.message, data=result))


def _no_retries() -> None:
    context = FlowRunContext.get()
    run = context.flow_run if context else None
    if run is None or not run.empirical_policy.retries:
        return
    policy = run.empirical_policy.model_copy(update={"retries": 0})
    with get_client(sync_client=True) as client:
        client.update_flow_run(run.id, empirical_policy=policy)


def verdict_result(state: State[Any]) -> Any:
    """The result a flow run ended with, a negative verdict's included; raises what ended it
    when it failed or crashed without a result."""
    value = state.result(raise_on_failure=False)
    if isinstance(value, BaseException):
        raise value
    if value is None and not state.is_completed():
        state.result()  # raises what ended it
    return value
