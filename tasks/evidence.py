"""Evidence tasks: start a run, compare it with its baseline, finish it with the EvalResult."""

from __future__ import annotations

from prefect import task

from assay.finops.budget import Decision
from assay.judge.reliability import JudgeReliability
from assay.regression import Comparison
from assay.runs.chunks import read_cases
from assay.runs.comparison import compare_with_baseline
from assay.runs.lifecycle import begin_run
from assay.runs.metrics import RunMetrics
from assay.runs.records import EvalResult, RunAggregate, RunOwner, RunPlan, finish_run
from assay.runs.trials import SettledCases, settle_cases
from assay.suites import registry
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="start-run", task_run_name="start-run", **IO_RETRIES)
def start_run_task(store: str, plan: RunPlan, owner: RunOwner, resuming: bool) -> RunAggregate:
    """Record the run as started (or resumed) in its aggregate and in the run index; a refused
    resume writes nothing; a completed run comes back untouched."""
    return begin_run(evidence_store(store), plan, owner, resuming=resuming)


def crash_flow_run(flow_run_id: str, message: str) -> None:
    """Set a flow run that is not final to Crashed (a killed attempt would show Running for ever).

    Best effort: nothing when this Prefect API does not know it (the attempt ran against another
    one) or it ended meanwhile. `assay serve` calls it at start-up through `flows.local`.
    """
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound
    from prefect.states import Crashed

    with get_client(sync_client=True) as client:
        try:
            state = client.read_flow_run(UUID(flow_run_id)).state
        except ObjectNotFound:
            return
        if state is not None and not state.is_final():
            client.set_flow_run_state(UUID(flow_run_id), Crashed(message=message), force=True)


@task(name="close-interrupted-attempt", task_run_name="close-interrupted-attempt")
def close_interrupted_attempt(flow_run_id: str, run_id: str) -> None:
    """Set the Prefect flow run of a resumed run's killed attempt to Crashed."""
    crash_flow_run(flow_run_id, f"interrupted; run {run_id} was resumed in another flow run")


@task(name="compare-with-baseline", task_run_name="compare-with-baseline", **IO_RETRIES)
def compare_task(
    store: str,
    aggregate: RunAggregate,
    metrics: RunMetrics,
    threshold: float,
    baseline: str | None,
    cross_suite: bool = False,
    calibration: str | None = None,
) -> Comparison:
    """Choose the baseline (explicit > pinned > automatic) and compare the run with it (with
    the judge-corrected difference when a calibration set is given)."""
    return compare_with_baseline(
        evidence_store(store),
        aggregate,
        metrics,
        threshold,
        baseline,
        cross_suite=cross_suite,
        calibration=calibration,
    )


@task(name="settle-cases", task_run_name="settle-cases", **IO_RETRIES)
def settle_cases_task(store: str, aggregate: RunAggregate, metrics: RunMetrics) -> SettledCases:
    """Decide each case over its trials and compute the trial and cluster figures (a run with
    neither reads nothing)."""
    target = evidence_store(store)
    _, suite = registry.resolve(target, f"{aggregate.suite}@{aggregate.suite_version}")
    return settle_cases(
        lambda: read_cases(target, aggregate.run_id), aggregate.trials_policy, metrics, suite
    )


@task(name="finish-run", task_run_name="finish-run", **IO_RETRIES)
def finish_run_task(
    store: str,
    aggregate: RunAggregate,
    metrics: RunMetrics,
    regression: Comparison,
    budget: Decision | None,
    reliability: JudgeReliability | None = None,
    settled: SettledCases | None = None,
) -> EvalResult:
    """Write the run's EvalResult (with its comparison) and mark the aggregate completed."""
    return finish_run(
        evidence_store(store), aggregate, metrics, regression, budget, reliability, settled
    )
