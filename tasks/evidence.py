"""Evidence tasks: start a run, compare it with its baseline, finish it with the EvalResult."""

from __future__ import annotations

from prefect import task

from assay.finops.budget import Decision
from assay.judge.reliability import JudgeReliability
from assay.regression import Comparison
from assay.runs.comparison import compare_with_baseline
from assay.runs.records import EvalResult, RunAggregate, RunPlan, finish_run, start_run
from assay.runs.scoring import RunMetrics
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="start-run", **IO_RETRIES)
def start_run_task(store: str, plan: RunPlan) -> RunAggregate:
    """Record the run as started in its mutable aggregate and in the run index."""
    return start_run(evidence_store(store), plan)


@task(name="compare-with-baseline", **IO_RETRIES)
def compare_task(
    store: str,
    aggregate: RunAggregate,
    metrics: RunMetrics,
    threshold: float,
    baseline: str | None,
) -> Comparison:
    """Choose the baseline (explicit > pinned > automatic) and compare the run with it."""
    return compare_with_baseline(evidence_store(store), aggregate, metrics, threshold, baseline)


@task(name="finish-run", **IO_RETRIES)
def finish_run_task(
    store: str,
    aggregate: RunAggregate,
    metrics: RunMetrics,
    regression: Comparison,
    budget: Decision | None,
    reliability: JudgeReliability | None = None,
) -> EvalResult:
    """Write the run's EvalResult (with its comparison) and mark the aggregate completed."""
    return finish_run(evidence_store(store), aggregate, metrics, regression, budget, reliability)
