"""Runs over HTTP: the request, the bounded run pool, and the launch of the same Prefect flows
the CLI runs (`suite-run`, `gate`).

- Inline outputs are validated with the request, then staged in this process's memory
  (`assay.staging`) for exactly as long as the flow runs; the flow gets the reference, never the
  text, so Prefect records nothing but `inline://…`.
- A run executes in a worker thread (the staging area is in-process), bounded by
  `max_concurrent_runs`; up to `max_queued_runs` more wait for a slot, anything beyond is 429
  with `Retry-After`. Reads use the server's own thread pool and never wait behind runs.
- The Prefect API is chosen as the CLI chooses it (`PREFECT_API_URL`, else the lasting local
  server, else an ephemeral API) — the service starts the ephemeral one once, at start-up
  and stops it when the service stops (`prefect_api`).
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Final, TypeVar
from uuid import UUID, uuid4

import anyio
import anyio.to_thread
import httpx
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from assay import staging
from assay.api.inputs import subject_param
from assay.api.problems import Problem, as_problem, unexpected, without_store_location
from assay.api.requests import FlowName, RequestBody
from assay.errors import NotFoundError
from assay.gate.decision import GateRun
from assay.gcpause import settle
from assay.outputs.sources import output_sources
from assay.runs.lifecycle import gone_reason, settled, this_process
from assay.runs.records import (
    EvalResult,
    RunAggregate,
    RunOwner,
    RunState,
    RunStatus,
    list_runs,
    load_aggregate,
    now,
    update_aggregate,
)
from assay.store import EvidenceStore, StoreUnavailableError
from assay.store.write_once import Shelf
from assay.suites import registry

if TYPE_CHECKING:
    from anyio import CapacityLimiter

T = TypeVar("T")
log = logging.getLogger("assay.api")

PREFECT_RETRY_AFTER_SECONDS = 30
"""Retry-After of a 503 for a Prefect API that refused a run (its client backed off already)."""


def launch(
    store: EvidenceStore,
    request: RequestBody,
    flow: FlowName,
    run_id: str | None = None,
    recorded: Callable[[EvalResult | GateRun], None] | None = None,
) -> EvalResult | GateRun:
    """Run the suite-run or gate flow for a request through the launcher (flows/launch.py), in
    this thread; blocks until it ends.

    The suite, subject, baseline and outputs are checked before any flow starts, so a bad
    reference or a bad output line is a 404/422 with nothing recorded in Prefect. `run_id`
    names the run before its flow run exists; default: the flow run's id. `recorded` is given
    the result as soon as the flow has recorded it (see `until_recorded`).
    """
    subject_param(request.subject)
    from flows.launch import launch as launch_flow

    def run_flow(outputs: str) -> EvalResult | GateRun:
        try:
            return launch_flow(
                request.options(store, outputs, flow, run_id),
                "gate" if flow == "gate" else "suite_run",
                store=store,
                labels=("api", *(["gate"] if flow == "gate" else [])),
                suite_files=False,
                recorded=recorded,
            )
        except (httpx.HTTPError, RuntimeError) as exc:
            # Prefect's client speaks httpx and has retried already; the run cannot go on. A
            # server that never answered comes as RuntimeError("Failed to reach API") from it.
            cause = exc if isinstance(exc, httpx.HTTPError) else exc.__cause__
            if not isinstance(cause, httpx.HTTPError):
                raise
            status = getattr(getattr(cause, "response", None), "status_code", None)
            raise Problem(
                503,
                "the Prefect API did not take the run"
                + (f" (HTTP {status} after retries)" if status else " (unreachable)")
                + "; retry later",
                kind="prefect-unavailable",
                headers={"Retry-After": str(PREFECT_RETRY_AFTER_SECONDS)},
            ) from None

    if request.outputs_uri is not None:
        return run_flow(request.outputs_uri)
    with staging.staged(request.staged_bytes()) as reference:
        return run_flow(reference)


class RunPool:
    """At most `concurrent` runs at once, at most `queued` more waiting; beyond that, 429."""

    def __init__(self, concurrent: int, queued: int) -> None:
        self.concurrent = concurrent
        self.queued = queued
        self.admitted = 0
        self._slots: CapacityLimiter | None = None
        self._threads: CapacityLimiter | None = None
        """Worker threads of runs only: runs never take threads from the pool reads use."""
        self._mean_seconds = 10.0
        self._background: set[asyncio.Task[Any]] = set()
        """Runs started by `start`, referenced until they end (the loop keeps weak ones)."""

    def retry_after(self) -> int:
        """Seconds a refused caller should wait: about one run's duration, at least 1."""
        return max(1, math.ceil(self._mean_seconds))

    def _admit(self) -> None:
        if self.admitted >= self.concurrent + self.queued:
            raise Problem(
                429,
                f"{self.admitted} runs are running or queued (limit "
                f"{self.concurrent} + {self.queued}); retry later",
                kind="too-many-runs",
                headers={"Retry-After": str(self.retry_after())},
            )
        if self._slots is None or self._threads is None:
            self._slots = anyio.CapacityLimiter(self.concurrent)
            self._threads = anyio.CapacityLimiter(self.concurrent)
        self.admitted += 1

    def start(
        self, work: Callable[[], T], answered: asyncio.Future[Any] | None = None
    ) -> asyncio.Task[T]:
        """Admit `work` now (429 when the queue is full) and run it in a worker thread once a
        slot is free, in the background: the request that started it may end, or its client
        leave, meanwhile.

        A run counts against the queue until it ends or, sooner, until its request is
        `answered` (see `until_recorded`); it keeps its slot until it ends. So a client that
        waits for each answer before its next request is never refused.
        """
        self._admit()
        counted = True

        def release(*_: Any) -> None:
            nonlocal counted
            if counted:  # on the event loop's thread only: no lock
                counted = False
                self.admitted -= 1

        if answered is not None:
            answered.add_done_callback(release)
        task = asyncio.get_running_loop().create_task(self._execute(work))
        task.add_done_callback(release)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    async def _execute(self, work: Callable[[], T]) -> T:
        assert self._slots is not None and self._threads is not None
        queued = time.monotonic()
        async with self._slots:
            started = time.monotonic()
            try:
                return await anyio.to_thread.run_sync(
                    partial(self._settled_after, work), limiter=self._threads
                )
            finally:
                ran = time.monotonic() - started
                self._mean_seconds = 0.8 * self._mean_seconds + 0.2 * ran
                log.info("run slot: waited %.3fs, ran %.3fs", started - queued, ran)

    def _settled_after(self, work: Callable[[], T]) -> T:
        """`work`, then — when no other run holds a slot — what the process keeps frozen
        (`assay.gcpause.settle`): a run in flight would have its passing objects frozen with it.
        Its caller was answered when the run recorded its result (`until_recorded`)."""
        try:
            return work()
        finally:
            if self._slots is not None and self._slots.borrowed_tokens <= 1:
                settle()


async def until_recorded(
    pool: RunPool, store: EvidenceStore, request: RequestBody, flow: FlowName
) -> EvalResult | GateRun:
    """Run a request's flow in `pool` and return its result as soon as the flow has recorded
    it (its result and findings). The flow then publishes its artifacts and report and sends its
    notifications after the answer, in the run's slot (a 10-case run answers in about half the
    time); a failure there is logged, and the recorded result stands."""
    loop = asyncio.get_running_loop()
    early: asyncio.Future[EvalResult | GateRun] = loop.create_future()

    def tell(result: EvalResult | GateRun) -> None:
        loop.call_soon_threadsafe(_settle_once, early, result)

    task = pool.start(partial(launch, store, request, flow, None, tell), answered=early)
    task.add_done_callback(partial(_failed_after_answer, early))
    await asyncio.wait({task, early}, return_when=asyncio.FIRST_COMPLETED)
    return early.result() if early.done() else task.result()


def _settle_once(future: asyncio.Future[T], value: T) -> None:
    if not future.done():
        future.set_result(value)


def _failed_after_answer(answered: asyncio.Future[Any], task: asyncio.Task[Any]) -> None:
    failure = None if task.cancelled() else task.exception()
    if failure is not None and answered.done():
        log.error(
            "a run answered with its recorded result then failed publishing: %s",
            type(failure).__name__,
        )


_FAILURES_KEPT = 1000


def _admissible(store: EvidenceStore, request: RequestBody) -> None:
    """The checks of a run request that read no outputs and no suite cases (`launch` makes them
    again, with the rest): the suite version, the subject, the baseline, and that `outputs_uri`
    lists objects (one listing: a bucket that is missing or down is the caller's 4xx/503)."""
    registry.resolve_version(store, request.suite)
    subject_param(request.subject)
    baseline = request.chosen().get("baseline")
    if baseline is not None:
        load_aggregate(store, baseline)
    if request.outputs_uri is not None:
        output_sources(request.outputs_uri)


class Acceptance(BaseModel):
    """What the store keeps of an asynchronous run from the moment it is accepted (write-once,
    before the 202 is sent): which flow, when, and the process that accepted it — never the
    request. A run still queued when that process died is thus known, and `interrupted`."""

    run_id: str
    flow: FlowName
    accepted_at: datetime
    owner: RunOwner


class LaunchFailure(BaseModel):
    """Why an accepted run failed (write-once, when the store takes it): the problem's detail
    its callers are shown, never the request. What a run failed before its flow recorded it
    (a bad output line) says after a restart."""

    run_id: str
    error: str
    at: datetime


ACCEPTANCES: Final = Shelf("accepted/runs/", Acceptance)
LAUNCH_FAILURES: Final = Shelf("accepted/failures/", LaunchFailure)
FLOW_RUN_RECHECK_SECONDS: Final = 1.0
"""How often Prefect is asked whether a flow run of this process ended, however many clients
follow its run."""


def _ours(owner: RunOwner) -> bool:
    """Whether `owner` is this process."""
    me = this_process()
    return (owner.host, owner.pid) == (me.host, me.pid)


def flow_run_end(flow_run: str) -> str | None:
    """How a flow run ended, as Prefect recorded it (`its flow run ended Failed: …`); None while
    it is not final, or when Prefect does not answer or know it."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    try:
        with get_client(sync_client=True) as client:
            state = client.read_flow_run(UUID(flow_run)).state
    except (ObjectNotFound, httpx.HTTPError, RuntimeError):
        return None
    if state is None or not state.is_final():
        return None
    return f"its flow run ended {state.name}" + (f": {state.message}" if state.message else "")


class AcceptedRuns:
    """The runs of this service as they are: asynchronous ones started in the run pool's
    background (known here by their run id from their acceptance, recorded in the store before
    the 202), and what this process knows of the flows it launched.

    The run id is chosen here, before the flow run exists, and handed to the flow as its
    `run_id` parameter (the one a resume uses), so the caller gets it in the 202 at once; the
    flow run's own id stays in the run's `owner.flow_run`.
    """

    def __init__(self, store: EvidenceStore, pool: RunPool) -> None:
        self.store = store
        self.pool = pool
        self._pending: dict[str, asyncio.Task[str | None]] = {}
        self._failed: dict[str, str] = {}
        """Runs of this process known to have failed, and why: kept here, since the store may
        be what failed."""
        self._asked: dict[str, float] = {}
        """When Prefect was last asked whether a flow run of this process ended."""
        self._lock = threading.Lock()

    async def accept(self, request: RequestBody, flow: FlowName) -> str:
        """Record a run as accepted, start it in the background and return its id at once (it
        is `queued` until its flow records it). What can be checked without reading the outputs
        (`_admissible`) is checked first and raised here (404/422/503), and a store that does
        not take the acceptance is a 503: no 202 without its record. What only the run finds (a
        bad output line) makes its state `failed` with that problem."""
        await run_in_threadpool(_admissible, self.store, request)
        run_id = str(uuid4())
        accepted = Acceptance(run_id=run_id, flow=flow, accepted_at=now(), owner=this_process())
        await run_in_threadpool(ACCEPTANCES.put, self.store, run_id, accepted)
        task = self.pool.start(partial(self._launch, request, flow, run_id))
        self._pending[run_id] = task
        task.add_done_callback(partial(self._settle, run_id))
        return run_id

    def _launch(self, request: RequestBody, flow: FlowName, run_id: str) -> str | None:
        """Run an accepted request (in its worker thread); returns why it failed, if it did,
        after recording that in the store (unless the store is what failed)."""
        try:
            launch(self.store, request, flow, run_id)
        except Exception as exc:
            problem = as_problem(exc)
            if problem is None:
                unexpected(exc)  # logs its type and frames
            error = without_store_location(
                problem.detail if problem else "the service failed; the error is in its log",
                self.store,
            )
            failure = LaunchFailure(run_id=run_id, error=error, at=now())
            with suppress(StoreUnavailableError):
                LAUNCH_FAILURES.put(self.store, run_id, failure)
            return error
        return None

    def _settle(self, run_id: str, task: asyncio.Task[str | None]) -> None:
        error = None if task.cancelled() or task.exception() else task.result()
        if error is not None:
            # Known before the run leaves `_pending`: `state` (on another thread) never finds
            # it in neither.
            self._remember(run_id, error)
        del self._pending[run_id]

    def _remember(self, run_id: str, error: str) -> None:
        with self._lock:
            self._failed[run_id] = error
            while len(self._failed) > _FAILURES_KEPT:
                del self._failed[next(iter(self._failed))]

    def state(self, run_id: str) -> RunState:
        """The run's state as it is: its aggregate's, settled (`settled`); for a run its flow
        has not recorded, what this service knows, else its acceptance's (`_unrecorded`).

        Raises:
            NotFoundError: Neither the store nor this service knows the run.
        """
        # Asked before the store is read: a run leaves `_pending` only once its aggregate, or
        # its failure, is known.
        pending = run_id in self._pending
        try:
            aggregate = load_aggregate(self.store, run_id)
        except NotFoundError as missing:
            return self._unrecorded(run_id, pending, missing)
        state = RunState.of(self.settled(aggregate))
        if state.status == "completed" and run_id in self._pending:
            # Scored, but its flow has more to record (a gate's decision): not done yet.
            return state.model_copy(update={"status": "running"})
        return state

    def _unrecorded(self, run_id: str, pending: bool, missing: NotFoundError) -> RunState:
        """A run without an aggregate: `failed` with why, `queued` while it waits in this
        service (or in another live one), `interrupted` when the process that accepted it is
        gone (the CLI's rule, `assay.runs.lifecycle.gone_reason`) — it never started."""
        error = self._failed.get(run_id)
        if error is not None:
            return RunState(run_id=run_id, status="failed", error=error)
        if pending:
            return RunState(run_id=run_id, status="queued")
        try:
            acceptance = ACCEPTANCES.get(self.store, run_id)
        except NotFoundError:
            raise missing from None
        with suppress(NotFoundError):
            error = LAUNCH_FAILURES.get(self.store, run_id).error
            return RunState(run_id=run_id, status="failed", error=error)
        owner = acceptance.owner
        # Not pending in the process that accepted it: an earlier one, whose pid this one has.
        gone = "its service stopped" if _ours(owner) else gone_reason(owner, acceptance.accepted_at)
        if gone is None:
            return RunState(run_id=run_id, status="queued")
        return RunState(
            run_id=run_id,
            status="interrupted",
            error=f"accepted but never started: {gone}; submit the run again",
        )

    def settled(self, aggregate: RunAggregate) -> RunAggregate:
        """A recorded run as it is (a copy; nothing is written): a `running` run whose process
        is gone `interrupted`, by the CLI's rule (`assay.runs.lifecycle.settled`); a `running`
        run of this process whose flow ended without recording its end (the store refused the
        write: a full disk) `failed`, with why."""
        owner = aggregate.owner
        if aggregate.status is not RunStatus.RUNNING or owner is None or not _ours(owner):
            return settled(aggregate)
        run_id = aggregate.run_id
        if run_id in self._pending:
            return aggregate
        error = self._failed.get(run_id)
        if error is None:  # a run this service waited for: its flow run says
            ended = self._flow_run_end(owner.flow_run)
            if ended is None:
                return aggregate
            # A flow records its run before its flow run ends: what the store says now stands.
            aggregate = load_aggregate(self.store, run_id)
            if aggregate.status is not RunStatus.RUNNING:
                return aggregate
            error = without_store_location(ended, self.store)
            self._remember(run_id, error)
        return aggregate.model_copy(update={"status": RunStatus.FAILED, "error": error})

    def _flow_run_end(self, flow_run: str | None) -> str | None:
        """`flow_run_end`, asked at most once a `FLOW_RUN_RECHECK_SECONDS` per flow run."""
        if flow_run is None:
            return None
        asked = time.monotonic()
        with self._lock:
            if asked - self._asked.get(flow_run, -math.inf) < FLOW_RUN_RECHECK_SECONDS:
                return None
            self._asked[flow_run] = asked
            while len(self._asked) > _FAILURES_KEPT:
                del self._asked[next(iter(self._asked))]
        return flow_run_end(flow_run)


@contextmanager
def prefect_api() -> Iterator[str]:
    """The Prefect API this service's runs use, for as long as the service runs; yields its URL.

    `assay serve` selects the API as every command does (`PREFECT_API_URL`, else the lasting
    server of `assay server start`; `assay/cli/orchestration.py`), so with either set, that
    server is used. Otherwise Prefect's ephemeral API (the one a CLI command would start on its
    first flow) is started here, once, so that no request pays for its start-up and every run
    of this service shares it — and it is stopped when the service stops (SIGTERM included:
    uvicorn runs the app's shutdown), never left running on its own.
    """
    from prefect.settings import PREFECT_API_URL

    configured = PREFECT_API_URL.value()
    if configured:
        yield str(configured)
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start()
    try:
        yield server.api_url
    finally:
        server.stop()


def settle_interrupted_runs(store: EvidenceStore) -> list[str]:
    """At start-up: mark the runs a killed earlier process left `running` interrupted, and
    their Prefect flow runs Crashed; returns their run ids.

    A run of inline outputs cannot be resumed (its outputs lived in the killed process's memory),
    so its record says to submit it again (`assay.runs.lifecycle.settled`).
    """
    from flows.launch import crash_flow_run

    interrupted = []
    for run in list_runs(store):
        if run.status is not RunStatus.RUNNING:
            continue
        run = settled(run)
        if run.status is not RunStatus.INTERRUPTED:
            continue  # still live in another process
        update_aggregate(store, run)  # the service recovers its own runs: this is no read
        interrupted.append(run.run_id)
        if run.owner is not None and run.owner.flow_run is not None:
            crash_flow_run(run.owner.flow_run, f"interrupted: {run.error}")
    return interrupted
