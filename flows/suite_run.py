"""The suite run: ingest → score and persist in chunks → compare → aggregate → artifacts →
findings → notify.

Outputs travel by reference (a path or URI parameter): Prefect records the parameters of every
run, so the flow must never receive output text. Work is chunked, so Prefect's overhead grows with
the number of chunks, not of cases; chunks are submitted to the flow's task runner (threads, or
a Dask cluster: see flows/runners.py) and merged in chunk order, so any runner records the same
evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from prefect import flow
from prefect.futures import PrefectFuture, as_completed, wait
from prefect.runtime import flow_run

from assay.finops.budget import Decision, strictest
from assay.hashing import OutputHasher, store_secret
from assay.judge.redaction import add_counts
from assay.judge.reliability import run_reliability
from assay.outputs import OutputSlice
from assay.runs.lifecycle import this_process
from assay.runs.records import EvalResult, RunPlan, RunStatus, fail_run, load_result
from assay.runs.render import suite_run_verdict
from assay.runs.scoring import RunMetrics
from assay.stats import preload as preload_statistics
from assay.subject import Subject
from assay.suites import registry
from flows.runners import chunk_runner
from tasks._store import evidence_store, store_reference
from tasks.artifacts import ProgressReporter, publish_run_artifacts
from tasks.evidence import (
    close_interrupted_attempt,
    compare_task,
    finish_run_task,
    start_run_task,
)
from tasks.findings import notify_findings, report_findings
from tasks.ingest import ingest_outputs
from tasks.naming import label_flow_run
from tasks.reliability import correct_judged_pass_rate
from tasks.scoring import CaseRow, ChunkSummary, score_chunk
from tasks.suites import resolve_suite
from tasks.verdicts import verdict_state

DEFAULT_CHUNK_SIZE = 2000


def run_name(parameters: Mapping[str, Any]) -> str:
    """`SUITE · SUBJECT` from a suite-run's (or gate's) parameters."""
    suite = str(parameters["suite"])
    subject = parameters.get("subject") or Subject.default_for(parameters["outputs"])
    return f"{Path(suite).name if Path(suite).is_file() else suite} · {subject}"


def _run_name() -> str:
    return run_name(flow_run.parameters)


@flow(
    name="suite-run",
    flow_run_name=_run_name,
    task_runner=chunk_runner(),
    persist_result=False,
    log_prints=False,
)
def suite_run(
    suite: str,
    outputs: str,
    subject: str | None = None,
    sample: int | None = None,
    seed: int = 0,
    store: str | None = None,
    storage_block: str | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    run_id: str | None = None,
    baseline: str | None = None,
    notification_block: str | None = None,
    judge_block: str | None = None,
    fresh_judge: bool = False,
    calibration: str | None = None,
    judge_repeats: int | None = None,
    resume: bool = False,
) -> EvalResult:
    """Score one subject's outputs against a published suite version and record the evidence.

    Args:
        suite: Published suite reference, `name@version` (or `name` for the latest), or a
            suite file, which is published first.
        outputs: Path or URI of a JSONL file or folder of candidate outputs.
        subject: `KIND:ID[@VARIANT]`; defaults to `agent:<outputs name>`.
        sample: Score only this many cases, chosen reproducibly by `seed`.
        seed: Seed for `sample`.
        store: Evidence store URI; defaults to `ASSAY_STORE` or `file://.assay`.
        storage_block: Name of a saved EvidenceStorage block; takes precedence over `store`.
        chunk_size: Cases per scoring chunk.
        baseline: Run id to compare with (default: the pinned baseline, else the latest
            comparable run).
        notification_block: Name of a saved NotificationTarget block that findings are sent to.
        judge_block: Name of a saved JudgeSettings block (default: `ASSAY_JUDGE_MODEL`,
            `OPENAI_API_KEY`, `OPENAI_BASE_URL`; neither: `llm_judge` checks are skipped).
        fresh_judge: Ignore cached verdicts and judge again.
        calibration: Path of a calibration set: adds the PPI++ judge-corrected pass rate of
            the run's `llm_judge` checks (`judge_corrected`), when the set was calibrated for
            this run's judge (else `judge_corrected` is null, with a warning saying why).
        judge_repeats: Judge each `llm_judge` check this many times (default: the JudgeSettings
            block's `judge_repeats`, else 1): majority verdict, an even split skipped
            (`judge split`), the flip rate reported in `judge_consistency`.
        run_id: Resume an interrupted run under its id (default: this flow run's id). Evidence
            already written is kept; identical chunks are not written twice.
        resume: `run_id` must name a recorded run (`assay run --resume`); an unknown id is an
            error instead of a new run. A resume that does not match the recorded run is
            refused before anything is written (see `assay.runs.lifecycle`).
    """
    preload_statistics()  # every run's summary needs them; they load while the tasks wait
    store_uri = store_reference(store, storage_block)
    version = resolve_suite(store_uri, suite)
    _, golden = registry.resolve(evidence_store(store_uri), version.ref)
    who = Subject.given_or_default(subject, outputs)
    label_flow_run(run_name({"suite": version.ref, "subject": str(who)}), version.suite, str(who))
    index = ingest_outputs(store_uri, version.ref, outputs, sample, seed, chunk_size)
    missing = [index.missing[i : i + chunk_size] for i in range(0, len(index.missing), chunk_size)]
    pieces: list[tuple[OutputSlice | None, list[str]]] = [(piece, []) for piece in index.slices] + [
        (None, ids) for ids in missing
    ]
    plan = RunPlan(
        run_id=run_id or str(flow_run.id),
        suite=version.suite,
        suite_version=version.version,
        subject_kind=who.kind,
        subject_id=who.id,
        variant=who.variant,
        pass_threshold=golden.pass_threshold,
        min_coverage=golden.min_coverage,
        outputs=outputs,
        sample=sample,
        seed=seed if sample is not None else None,
        cases=sum(p.cases for p in index.slices) + len(index.missing),
        chunks=len(pieces),
        # Keyed like output hashes: a plain digest of a small run's outputs could be guessed.
        outputs_digest=OutputHasher(store_secret(evidence_store(store_uri)))(index.digest()),
    )
    this_run = str(flow_run.id)
    aggregate = start_run_task(store_uri, plan, this_process(this_run), resuming=resume)
    if aggregate.status is RunStatus.COMPLETED:  # a resume of a finished run: it stands
        return load_result(evidence_store(store_uri), plan.run_id)
    killed = aggregate.resumed_from.flow_run if aggregate.resumed_from else None
    if killed is not None and killed != this_run:
        close_interrupted_attempt(killed, plan.run_id)
    futures: list[PrefectFuture[ChunkSummary]] = []
    try:
        progress = ProgressReporter(store_uri, aggregate)
        running = RunMetrics()
        futures = [
            score_chunk.submit(
                store_uri,
                plan.run_id,
                version.ref,
                number,
                piece,
                ids,
                sample,
                seed,
                plan.subject,
                judge_block,
                fresh_judge,
                judge_repeats,
            )
            for number, (piece, ids) in enumerate(pieces)
        ]
        summaries: list[ChunkSummary] = []
        for future in as_completed(futures):
            summary = future.result()
            summaries.append(summary)
            running.merge(summary.metrics)
            progress.chunk_done(summary.chunk, running)
        # Merged in chunk order, not completion order: float sums then match a sequential run.
        metrics = RunMetrics()
        budget: Decision | None = None
        redactions: dict[str, int] | None = None
        repeats = 1
        rows: list[CaseRow] = []
        for summary in sorted(summaries, key=lambda done: done.chunk):
            metrics.merge(summary.metrics)
            budget = strictest(budget, summary.budget)
            aggregate.judge = summary.judge or aggregate.judge
            if summary.judge is not None:
                redactions = add_counts(redactions or {}, summary.redactions)
                repeats = max(repeats, summary.judge_repeats)
            rows.extend(summary.rows)
        regression = compare_task(
            store_uri, aggregate, metrics, golden.regression_threshold, baseline
        )
        correction = (
            None
            if calibration is None
            else correct_judged_pass_rate(store_uri, aggregate.judge, metrics, calibration)
        )
        reliability = run_reliability(
            repeats=repeats,
            repeated=metrics.repeated_checks,
            unanimous=metrics.unanimous_checks,
            split=metrics.split_checks,
            redactions=redactions,
            correction=correction,
        )
        result = finish_run_task(store_uri, aggregate, metrics, regression, budget, reliability)
    except BaseException as exc:
        # No chunk outlives its failed run: one still retrying its writes would race the
        # evidence of the re-run that resumes it.
        wait(futures)
        with suppress(Exception):  # best effort: the store may be what failed
            fail_run(evidence_store(store_uri), plan.run_id, f"{type(exc).__name__}: {exc}")
        raise
    publish_run_artifacts(store_uri, result, rows)
    findings = report_findings(store_uri, result)
    if findings and notification_block:
        notify_findings(notification_block, findings)
    return verdict_state(suite_run_verdict(result), result)
