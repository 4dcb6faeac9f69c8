"""The suite run: ingest → score and persist in chunks → compare → aggregate → findings →
(the caller is told the recorded result) → artifacts → report → notify.

Outputs travel by reference (a path or URI parameter): Prefect records the parameters of every
run, so the flow must never receive output text. Work is chunked, so Prefect's overhead grows with
the number of chunks, not of cases; chunks are submitted to the flow's task runner (threads, or
a Dask cluster: see flows/runners.py) and merged in chunk order, so any runner records the same
evidence.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path

from prefect.futures import PrefectFuture, as_completed, wait
from prefect.runtime import flow_run
from prefect.task_runners import TaskRunner

from assay.preload import preload
from assay.reports import charts
from assay.runs.lifecycle import this_process
from assay.runs.options import RunOptions
from assay.runs.pipeline import ChunkJob, ChunkSummary, MergedChunks, merge_chunks, set_up_run
from assay.runs.records import EvalResult, RunAggregate, RunStatus, fail_run, load_result
from assay.runs.render import suite_run_verdict
from assay.subject import Subject
from assay.telemetry.export import export_run
from flows._conventions import assay_flow, publish_run_report, tell_caller
from flows.runners import chunk_runner
from tasks._log import run_log
from tasks._store import evidence_store, store_reference
from tasks.artifacts import ProgressReporter, publish_run_artifacts
from tasks.evidence import (
    close_interrupted_attempt,
    compare_task,
    finish_run_task,
    settle_cases_task,
    start_run_task,
)
from tasks.findings import notify_findings, report_findings
from tasks.ingest import ingest_outputs
from tasks.naming import label_flow_run
from tasks.reliability import correct_judged_pass_rate
from tasks.scoring import score_chunk
from tasks.suites import resolve_suite


def run_name(options: RunOptions) -> str:
    """`SUITE · SUBJECT` from a suite-run's (or gate's) options."""
    subject = options.subject or Subject.default_for(options.outputs)
    suite = options.suite
    return f"{Path(suite).name if Path(suite).is_file() else suite} · {subject}"


def _score_chunks(
    store: str,
    aggregate: RunAggregate,
    jobs: list[ChunkJob],
    runner: TaskRunner[PrefectFuture[ChunkSummary]],
    futures: list[PrefectFuture[ChunkSummary]],
) -> MergedChunks:
    """Every chunk scored on `runner` (each one's future added to `futures`, for the caller to
    wait on when the run fails), the run's progress reported as chunks finish, then merged in
    chunk order."""
    progress = ProgressReporter(store, aggregate)
    futures.extend(runner.submit(score_chunk, {"job": job}) for job in jobs)
    summaries = []
    for future in as_completed(futures):
        summaries.append(future.result())
        progress.chunk_done(summaries[-1].chunk, summaries[-1].metrics)
    progress.flush()
    return merge_chunks(summaries)


@assay_flow(run_name=run_name, verdict=suite_run_verdict)
def suite_run(options: RunOptions) -> EvalResult:
    """Score one subject's outputs against a published suite version and record the evidence.

    Args:
        options: The run's options (`assay.runs.options.RunOptions`, docs/configuration.md):
            validated, with every bound, on every run — a deployment run's too.

    A resume (`resume` with `run_id`) that does not match the recorded run is refused before
    anything is written (see `assay.runs.lifecycle`); a finished run's resume returns its
    result. The verdict is the flow run's final state: `Passed` (Completed), or `Regressed` /
    `Not passed` (Failed), the EvalResult recorded and returned either way.
    """
    preload(charts.LIBRARIES)  # the report's charts, drawn at the run's end
    store = store_reference(options.store, options.storage_block)
    version = resolve_suite(store, options.suite)
    who = Subject.given_or_default(options.subject, options.outputs)
    label_flow_run(f"{version.ref} · {who}", version.suite, str(who))
    index = ingest_outputs(
        store, version.ref, options.outputs, options.sample, options.seed, options.chunk_size
    )
    this_run = str(flow_run.id)
    setup = set_up_run(
        store, evidence_store(store), options, version, index, options.run_id or this_run
    )
    plan = setup.plan
    aggregate = start_run_task(store, plan, this_process(this_run), resuming=options.resume)
    if aggregate.status is RunStatus.COMPLETED:  # a resume of a finished run: it stands
        return load_result(evidence_store(store), plan.run_id)
    killed = aggregate.resumed_from.flow_run if aggregate.resumed_from else None
    if killed is not None and killed != this_run:
        close_interrupted_attempt(killed, plan.run_id)
    futures: list[PrefectFuture[ChunkSummary]] = []
    # The chunks' runner is the options' (a Dask cluster, local workers, else threads),
    # opened here so that a deployment's run honours them as a launched one does.
    with chunk_runner(options.dask, options.workers) as runner:
        try:
            merged = _score_chunks(store, aggregate, setup.jobs, runner, futures)
            aggregate.judge = merged.judge or aggregate.judge
            settled = settle_cases_task(store, aggregate, merged.metrics)
            regression = compare_task(
                store,
                aggregate,
                settled.metrics,
                setup.regression_threshold,
                options.baseline,
                options.cross_suite,
                options.calibration,
            )
            correction = (
                None
                if options.calibration is None
                else correct_judged_pass_rate(
                    store, aggregate.judge, settled.metrics, options.calibration
                )
            )
            result = finish_run_task(
                store,
                aggregate,
                settled.metrics,
                regression,
                merged.budget,
                merged.reliability(correction),
                settled,
            )
        except BaseException as exc:
            # No chunk outlives its failed run: one still retrying its writes would race the
            # evidence of the re-run that resumes it.
            wait(futures)
            with suppress(Exception):  # best effort: the store may be what failed
                fail_run(evidence_store(store), plan.run_id, f"{type(exc).__name__}: {exc}")
            raise
    findings = report_findings(store, result)
    tell_caller(result)  # the records are complete
    publish_run_artifacts(store, result, merged.rows)
    publish_run_report(store, result.run_id)
    if findings and options.notification_block:
        notify_findings(options.notification_block, findings)
    exported = export_run(evidence_store(store), result)  # None unless ASSAY_OTEL_EXPORT is set
    if exported is not None and exported.warning:
        run_log().warning(exported.warning)
    return result
