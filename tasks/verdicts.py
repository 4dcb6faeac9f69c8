"""A flow's verdict as its final Prefect state, named for the verdict (see `assay.verdicts`) and
logged to the run's Logs tab: Completed when it is positive (`Passed`), Failed when it is
negative (`Regressed`, `Not passed`, `Gate failed`, …) — red in the UI, counted on the
Dashboard, and what Prefect's automations and notifications trigger on.

A negative verdict is still a result: the Failed state holds it, and whoever ran the flow reads it
back with `verdict_result` (the launcher, a parent flow). It is also final: the Prefect server
turns a proposed Failed state into `AwaitingRetry` while the run has flow retries left (its
`RetryFailedFlows` rule, measured: the retry re-ran the flow and ended Completed), so a negative
verdict first sets the run's retries to 0 — flow retries are for crashes, never for a verdict.

Whoever launched a flow in this process may also want its result *as soon as it is recorded*,
before the flow publishes its artifacts, report and findings (the service answers a run's
request then): `told_when_recorded` listens, the flow calls `recorded`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from prefect.client.orchestration import get_client
from prefect.client.schemas.objects import State
from prefect.context import FlowRunContext
from prefect.states import Completed, Failed

from assay.verdicts import FlowVerdict
from tasks._log import run_log

T = TypeVar("T")
Listener = Callable[[Any], None]

_listening: ContextVar[dict[str, Listener] | None] = ContextVar("assay_listening", default=None)
"""Who waits for which flow's recorded result, in this context: a flow called in-process runs
its body in its caller's thread and context (its tasks in copies of it)."""


@contextmanager
def told_when_recorded(flow: str, listener: Listener) -> Iterator[None]:
    """While in the block, `listener` gets the result of the `flow` (`suite_run`, `gate`)
    called in it as soon as that flow has recorded it (a subflow of another name tells
    nobody)."""
    token = _listening.set({**(_listening.get() or {}), flow: listener})
    try:
        yield
    finally:
        _listening.reset(token)


def recorded(flow: str, result: Any) -> None:
    """Called by `flow` once its records are complete: tells whoever listens (see
    `told_when_recorded`); a listener's failure is never the flow's."""
    listener = (_listening.get() or {}).get(flow)
    if listener is not None:
        try:
            listener(result)
        except Exception as exc:  # the run goes on whatever the listener did
            run_log().warning("a listener of the %s flow failed: %s", flow, type(exc).__name__)


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
