"""One nightly job as its own flow run of a deployment, started once per night.

The job runs wherever a worker of the deployment's pool picks it up; this task only starts it
(or finds the run that an earlier attempt of the same night started, by its idempotency key),
waits for it, and reads its EvalResult back from the evidence store: a job's result is not
persisted in Prefect, and never crosses the API. `adjust_night` then adjusts every regression test
the night's runs made for multiplicity, and records the findings that gives rise to.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any, cast

from prefect import task
from prefect.client.schemas.objects import FlowRun
from prefect.deployments import run_deployment
from pydantic import BaseModel

from assay.errors import NotFoundError
from assay.findings import record
from assay.multiplicity import Family
from assay.runs.findings import family_findings
from assay.runs.multiplicity import night_families
from assay.runs.records import EvalResult, load_result
from tasks._options import IO_RETRIES, NO_PERSISTENCE
from tasks._store import evidence_store
from tasks.findings import announce

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


class NightFamilies(BaseModel):
    """A night's regression tests, adjusted: one family per suite job, one of slices."""

    regressions: Family
    slices: Family


@task(name="adjust-night", task_run_name="adjust-night", **IO_RETRIES)
def adjust_night(store: str, run_ids: list[str], report: str) -> NightFamilies:
    """Adjust the regression tests of these runs as two families (Holm for the runs, BH for
    their slices) and record each finding they give rise to (write-once, keyed per test).

    Args:
        store: Store reference the runs wrote their evidence to.
        run_ids: The night's completed runs (those without a baseline made no test).
        report: The nightly's flow run id: which adjustment a finding's figures come from.
    """
    target = evidence_store(store)
    results = {run_id: load_result(target, run_id) for run_id in run_ids}
    regressions, slices = night_families(target, list(results.values()))
    occurred_at = datetime.now(UTC)
    for family in (regressions, slices):
        for finding in family_findings(family, report, results, occurred_at):
            if record(target, finding):
                announce(finding)
    return NightFamilies(regressions=regressions, slices=slices)
