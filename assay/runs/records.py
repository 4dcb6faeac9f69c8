"""Runs: the EvalResult, the mutable run aggregate, the run index, and the evidence layout.

Layout in the evidence store:
    runs/<run_id>/aggregate.json          RunAggregate (the only mutable object)
    runs/<run_id>/cases/<000000>.json     EvidenceChunk (write-once, deterministic content)
    runs/<run_id>/result.json             EvalResult (write-once)
    index/runs/<run_id>.json              RunIndexEntry (write-once; what `runs list` reads)
    index/subjects/<suite>/<kind>/<id>/<started>-<run_id>.json
                                          the same entry, by suite and subject in start order
                                          (write-once; what the automatic baseline reads)
    accepted/runs/<run_id>.json           a run `assay serve` accepted, before it starts
                                          (write-once: flow, time, owning process; never the
                                          request), so a crash leaves it `interrupted`
    accepted/failures/<run_id>.json       why an accepted run failed before it was recorded

The evidence chunks are written and read by `assay.runs.chunks`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import BaseModel, Field, model_validator

from assay.errors import NotFoundError
from assay.finops.budget import Decision
from assay.finops.ledger import read_costs
from assay.identifiers import named_run
from assay.judge.port import JudgePin
from assay.judge.reliability import JudgeReliability
from assay.regression import Comparison
from assay.runs.metrics import RunMetrics, run_verdict
from assay.runs.trials import Clustered, SettledCases, TrialFigures
from assay.store import EvidenceStore
from assay.store.write_once import write_once
from assay.subject import Subject
from assay.suites.suite import DEFAULT_MIN_COVERAGE, TrialsPolicy


class RunStatus(StrEnum):
    """Lifecycle of a run aggregate."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    """Its process was killed or lost; `--resume` continues it (see `assay.runs.lifecycle`)."""


class RunOwner(BaseModel):
    """The process executing one attempt at a run, so a later check can tell it is gone."""

    host: str
    pid: int
    flow_run: str | None = None
    """The Prefect flow run of this attempt (a resume runs in a new flow run)."""


class _RunOf(BaseModel):
    """Which run, of which suite version, on which subject: what every run record starts with."""

    run_id: str
    suite: str
    suite_version: int
    subject_kind: str
    subject_id: str
    variant: str | None

    @property
    def subject(self) -> str:
        """`KIND:ID[@VARIANT]`."""
        return str(Subject(kind=self.subject_kind, id=self.subject_id, variant=self.variant))


class RunPlan(_RunOf):
    """Everything fixed before scoring starts; shared by the aggregate and the EvalResult."""

    pass_threshold: float
    min_coverage: float = DEFAULT_MIN_COVERAGE
    """Records written before the suite field existed read as the default."""
    outputs: str
    """Reference (path or URI) to the outputs: never their content."""
    sample: int | None = None
    seed: int | None = None
    cases: int
    """Outputs to score (one per case, or per trial with trials) plus cases with none."""
    chunks: int
    trials_policy: TrialsPolicy | None = None
    """How the run decides cases over trials: the suite's `trials`, else the default policy
    when outputs carry `trial`; None for a run of one output per case."""
    outputs_digest: str | None = None
    """`OutputsIndex.digest` of the outputs as the run indexed them, keyed by the store's
    output-hash secret (None on older records): a resume whose outputs index otherwise is
    refused."""


class RunAggregate(RunPlan):
    """The mutable view of a run while and after it executes."""

    status: RunStatus
    started_at: datetime
    updated_at: datetime
    chunks_done: int = 0
    chunk_order: list[int] = Field(default_factory=list)
    """The chunks finished so far, in the order they finished: what a live event stream
    follows, so a reconnecting client resumes in the same order (`Last-Event-ID`)."""
    metrics: RunMetrics = Field(default_factory=RunMetrics)
    regression: Comparison | None = None
    judge: JudgePin | None = None
    error: str | None = None
    owner: RunOwner | None = None
    """The process of the current (or last) attempt; None on records from before it existed."""
    resumed_from: RunOwner | None = None
    """The attempt this one took over from, when it was resumed."""


RunPhase = Literal["queued", "running", "completed", "failed", "interrupted"]


class RunState(BaseModel):
    """An asynchronous run as `POST /runs` (or `/gate`) with `Prefer: respond-async` accepts it,
    and as `GET /runs/{id}` shows it until it is completed (`assay.client` returns it)."""

    run_id: str
    status: RunPhase = Field(
        description="`queued`: accepted, not started scoring (waiting for a slot, or starting)."
    )
    chunks_done: int = 0
    chunks: int | None = None
    cases: int | None = None
    error: str | None = None

    @classmethod
    def of(cls, aggregate: RunAggregate) -> RunState:
        """The state a recorded run is in."""
        return cls(
            run_id=aggregate.run_id,
            status=aggregate.status.value,
            chunks_done=aggregate.chunks_done,
            chunks=aggregate.chunks,
            cases=aggregate.cases,
            error=aggregate.error,
        )


class EvalResult(JudgeReliability, _RunOf):
    """The canonical result of one run: what other systems read, without knowing Assay's tables."""

    score: Annotated[float | None, Field(ge=0.0, le=1.0)]
    passed: bool
    pass_rate: Annotated[float | None, Field(ge=0.0, le=1.0)]
    occurred_at: datetime
    metrics: RunMetrics
    pass_threshold: float
    min_coverage: float = DEFAULT_MIN_COVERAGE
    verdict_reason: str | None = None
    """Why the run did not pass (`coverage 1/5 below 0.95`, `pass rate 36/50 below 0.8`)."""
    outputs: str
    sample: int | None = None
    seed: int | None = None
    regression: Comparison | None = None
    budget: Decision | None = None
    judge: JudgePin | None = None
    """Model pin and prompt version of the judge, when the run judged anything."""
    trials: TrialFigures | None = None
    """Pass rate over trials (cluster-robust), pass@k, pass^k, flaky cases: runs with trials."""
    clustered: Clustered | None = None
    """The case pass rate with the suite's clusters: suites whose cases carry `cluster`."""

    @model_validator(mode="after")
    def _metrics_score_sum(self) -> Self:
        """A stored RunMetrics leaves out its score sum (stored bytes unchanged, docs/runs.md):
        a result read back gets it from the mean score it keeps, so its metrics compare."""
        if self.score and not self.metrics.score_sum:
            self.metrics.score_sum = self.score * self.metrics.scored
        return self


class RunIndexEntry(BaseModel):
    """One line of the run index."""

    run_id: str
    suite: str
    suite_version: int
    subject: str
    started_at: datetime


def aggregate_key(run_id: str) -> str:
    """Key of a run's aggregate (it exists once the run has started)."""
    return f"runs/{run_id}/aggregate.json"


def _result_key(run_id: str) -> str:
    return f"runs/{run_id}/result.json"


def now() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


def start_run(store: EvidenceStore, plan: RunPlan, owner: RunOwner | None = None) -> RunAggregate:
    """Record a run as started (by `owner`).

    Re-starting an existing (interrupted) run keeps its evidence and its start time; progress
    counts restart from zero because every chunk is visited again (identical writes are no-ops).
    Whether a run may be re-started is `assay.runs.lifecycle.begin_run`'s to decide.
    """
    started = now()
    try:
        aggregate = load_aggregate(store, plan.run_id)
    except NotFoundError:
        aggregate = RunAggregate(
            **plan.model_dump(),
            status=RunStatus.RUNNING,
            started_at=started,
            updated_at=started,
            owner=owner,
        )
    else:
        aggregate = aggregate.model_copy(
            update={
                "status": RunStatus.RUNNING,
                "updated_at": started,
                "error": None,
                "chunks_done": 0,
                "chunk_order": [],
                "metrics": RunMetrics(),
                "owner": owner,
                "resumed_from": aggregate.owner,
            }
        )
    store.put(aggregate_key(plan.run_id), aggregate.model_dump_json().encode())
    _index_run(store, aggregate)
    return aggregate


SUBJECT_INDEX_COMPLETE = "index/subjects.complete"
"""Written once every run in the store has its subject index entry (`runs_of_subject`)."""


def _index_run(store: EvidenceStore, run: RunAggregate) -> None:
    entry = RunIndexEntry(
        run_id=run.run_id,
        suite=run.suite,
        suite_version=run.suite_version,
        subject=run.subject,
        started_at=run.started_at,
    ).model_dump_json()
    store.put_once_if_absent(f"index/runs/{run.run_id}.json", entry.encode())
    started = f"{run.started_at.astimezone(UTC):%Y%m%dT%H%M%S%fZ}-{run.run_id}.json"
    store.put_once_if_absent(_subject_index(run) + started, entry.encode())


def _subject_index(run: _RunOf) -> str:
    return f"index/subjects/{run.suite}/{run.subject_kind}/{run.subject_id}/"


def runs_of_subject(store: EvidenceStore, run: _RunOf) -> Iterator[RunAggregate]:
    """The runs of `run`'s suite and subject (every variant), newest first: only those are read
    (the automatic baseline read every run in the store, a GET each, on every run). A store
    whose runs predate this index gets it first, once (`SUBJECT_INDEX_COMPLETE`)."""
    if not store.exists(SUBJECT_INDEX_COMPLETE):
        for earlier in list_runs(store):
            _index_run(store, earlier)
        store.put_once_if_absent(SUBJECT_INDEX_COMPLETE, b"{}")
    for key in reversed(list(store.list(_subject_index(run)))):
        _started, _, run_id = key.rpartition("/")[2].removesuffix(".json").partition("-")
        yield load_aggregate(store, run_id)


def finished_chunks(aggregate: RunAggregate) -> list[int]:
    """The run's finished chunks in the order they finished; for a completed run, every chunk
    (those its record does not order — records from before `chunk_order` — in chunk order)."""
    if aggregate.status is not RunStatus.COMPLETED:
        return aggregate.chunk_order
    ordered = set(aggregate.chunk_order)
    return aggregate.chunk_order + [c for c in range(aggregate.chunks) if c not in ordered]


def update_aggregate(store: EvidenceStore, aggregate: RunAggregate) -> None:
    """Replace the mutable aggregate."""
    aggregate.updated_at = now()
    store.put(aggregate_key(aggregate.run_id), aggregate.model_dump_json().encode())


def finish_run(
    store: EvidenceStore,
    aggregate: RunAggregate,
    metrics: RunMetrics,
    regression: Comparison | None = None,
    budget: Decision | None = None,
    reliability: JudgeReliability | None = None,
    settled: SettledCases | None = None,
) -> EvalResult:
    """Write the EvalResult (write-once) and mark the aggregate completed.

    `settled` carries the figures of a run with trials or clusters (`assay.runs.trials`), whose
    `metrics` are then the ones given.

    A run finished before (an interrupted re-run) keeps its first EvalResult: evidence is never
    rewritten, and the scores it reports are the same because chunks are deterministic.

    `judge_calls` and `judge_cost_usd` are the cost ledger's for this run id, over every attempt
    (killed attempts, resumes, lost workers, task retries): the chunks' own counts see only the
    attempt that finished them, which found the earlier attempts' verdicts as cache hits.
    """
    first = aggregate.started_at.astimezone(UTC).date()
    paid = read_costs(store, first, now().date(), run_id=aggregate.run_id)
    metrics = metrics.model_copy(
        update={
            "write_guard": store.write_guard,
            "judge_calls": sum(record.calls for record in paid),
            "judge_cost_usd": math.fsum(record.cost_usd for record in paid),
        }
    )
    passed, reason = run_verdict(metrics, aggregate.pass_threshold, aggregate.min_coverage)
    result = EvalResult(
        **aggregate.model_dump(
            include={
                "run_id",
                "suite",
                "suite_version",
                "subject_kind",
                "subject_id",
                "variant",
                "pass_threshold",
                "min_coverage",
                "outputs",
                "sample",
                "seed",
                "judge",
            }
        ),
        score=metrics.score,
        passed=passed,
        verdict_reason=reason,
        pass_rate=metrics.pass_rate,
        occurred_at=now(),
        metrics=metrics,
        regression=regression,
        budget=budget,
        trials=settled.trials if settled else None,
        clustered=settled.clustered if settled else None,
        **dict(reliability or JudgeReliability()),
    )
    result = write_once(store, _result_key(result.run_id), result)
    aggregate.status = RunStatus.COMPLETED
    aggregate.metrics = metrics
    aggregate.regression = result.regression
    aggregate.chunks_done = aggregate.chunks
    update_aggregate(store, aggregate)
    return result


def fail_run(store: EvidenceStore, run_id: str, error: str) -> None:
    """Mark a started run as failed with a (text-free) error message; a completed run stays
    completed (its EvalResult stands, whatever a later attempt at it met)."""
    try:
        aggregate = load_aggregate(store, run_id)
    except NotFoundError:
        return
    if aggregate.status is RunStatus.COMPLETED:
        return
    aggregate.status = RunStatus.FAILED
    aggregate.error = error
    update_aggregate(store, aggregate)


def load_aggregate(store: EvidenceStore, run_id: str) -> RunAggregate:
    """Read a run's aggregate; NotFoundError if there is no such run."""
    try:
        return RunAggregate.model_validate_json(store.get(aggregate_key(run_id)))
    except NotFoundError:
        raise NotFoundError(f"no run {run_id} in {store.uri}") from None


def load_result(store: EvidenceStore, run_id: str) -> EvalResult:
    """Read a run's EvalResult; NotFoundError if it has none (yet)."""
    try:
        return EvalResult.model_validate_json(store.get(_result_key(run_id)))
    except NotFoundError:
        raise NotFoundError(f"run {run_id} has no EvalResult in {store.uri}") from None


def resolve_run_id(store: EvidenceStore, given: str) -> str:
    """The run id `given` names: itself when such a run is recorded, else the one recorded run
    whose id starts with it (at least `MIN_RUN_ID_PREFIX` characters; `named_run`)."""
    if store.exists(aggregate_key(given)):
        return given
    recorded = (
        key.removeprefix("index/runs/").removesuffix(".json") for key in store.list("index/runs/")
    )
    return named_run(given, recorded, store.uri)


def list_runs(store: EvidenceStore) -> list[RunAggregate]:
    """Every run's aggregate, newest first."""
    runs = [
        load_aggregate(store, key.removeprefix("index/runs/").removesuffix(".json"))
        for key in store.list("index/runs/")
    ]
    return sorted(runs, key=lambda run: run.started_at, reverse=True)
