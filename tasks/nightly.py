"""One nightly job as its own flow run of a deployment, started once per night.

The job runs wherever a worker of the deployment's pool picks it up; this task only starts it
(or finds the run that an earlier attempt of the same night started, by its idempotency key),
waits for it, and reads its EvalResult back from the evidence store: a job's result is not
persisted in Prefect, and never crosses the API.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any, cast

from prefect import task
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from pydantic import BaseModel

from assay.errors import NotFoundError
from assay.runs.records import EvalResult, load_result
from tasks._options import NO_PERSISTENCE
from tasks._store import evidence_store

POLL_SECONDS = 2


class LaunchedJob(BaseModel):
    """How a job's flow run ended: its id, and its EvalResult when it completed."""

    flow_run_id: str
    result: EvalResult | None = None
    error: str | None = None


@task(name="nightly-job", task_run_name="job {label}", **NO_PERSISTENCE)
def run_job(
    deployment: str, parameters: dict[str, Any], idempotency_key: str, store: str, label: str
) -> LaunchedJob:
    """Start (at most once per `idempotency_key`) and await a flow run of `deployment`.

    Args:
        deployment: `FLOW/DEPLOYMENT`, e.g. `suite-run/nightly-job`.
        parameters: The suite-run parameters: references (paths, URIs, names), never outputs.
        idempotency_key: The server returns the existing run for a key it has seen.
        store: Store reference the job writes its evidence to.
        label: `SUITE · SUBJECT`, for the task run's name.
    """
    run = cast(
        FlowRun,  # called from sync code, run_deployment returns the run, not a coroutine
        run_deployment(
            deployment,
            parameters=parameters,
            idempotency_key=idempotency_key,
            poll_interval=POLL_SECONDS,
            as_subflow=True,
        ),
    )
    state = run.state
    if state is not None and (state.is_completed() or state.is_failed()):
        # A negative verdict (`Regressed`, `Not passed`) is a Failed state with its result
        # recorded; a run that failed by raising has none.
        with suppress(NotFoundError):
            return LaunchedJob(
                flow_run_id=str(run.id), result=load_result(evidence_store(store), str(run.id))
            )
    reason = (state.message or state.name) if state else "no state"
    return LaunchedJob(flow_run_id=str(run.id), error=reason)
