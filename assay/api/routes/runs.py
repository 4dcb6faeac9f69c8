"""Runs: submit a run (the suite-run flow; at once with `Prefer: respond-async`), list runs, read
one, list its cases, follow or replay it as Server-Sent Events."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Final

import anyio
from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from assay import staging
from assay.api.auth import Operator, Store, Token, Viewer, is_local
from assay.api.idempotency import Idempotency
from assay.api.inputs import subject_param
from assay.api.pagination import (
    DEFAULT_LIMIT,
    MAX_LIMIT,
    Page,
    decode_position,
    encode_position,
    paginate,
    sort_key,
)
from assay.api.problems import AUTHENTICATED, Problem, documented, without_store_location
from assay.api.requests import FlowName, RequestBody, RunRequest
from assay.api.runner import AcceptedRuns, RunPool, until_recorded
from assay.errors import NotFoundError
from assay.gate.decision import GateRun
from assay.identifiers import MAX_IDENTIFIER_BYTES, MIN_RUN_ID_PREFIX
from assay.runs.cases import CaseFilter, CaseResult, case_page
from assay.runs.chunks import read_chunk
from assay.runs.cost_plan import CostPlan, plan_run
from assay.runs.records import (
    EvalResult,
    RunAggregate,
    RunState,
    RunStatus,
    finished_chunks,
    list_runs,
    load_aggregate,
    load_result,
    resolve_run_id,
)
from assay.runs.scoring import CaseEvidence
from assay.store import EvidenceStore, StoreUnavailableError

router = APIRouter(tags=["runs"], responses=AUTHENTICATED | documented(404, 409, 429))

RUN_ID: Final = rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_IDENTIFIER_BYTES - 1}}}$"
"""ASCII only, so its characters are its bytes: at most `MAX_IDENTIFIER_BYTES`."""
GivenRunId = Annotated[
    str,
    Path(
        alias="run_id",
        pattern=RUN_ID,
        description="The run id (its Prefect flow run id), or a unique prefix of one (4+ "
        "characters).",
    ),
]


async def whole_run_id(run_id: GivenRunId, store: Store) -> str:
    """The run a path names: its id, or the one recorded run it is a unique prefix of (an
    ambiguous prefix is 422, listing the runs). An id no run has is left as it is, for the
    route to answer (404, or an accepted run's state)."""
    if len(run_id) < MIN_RUN_ID_PREFIX:
        return run_id
    try:
        return await run_in_threadpool(resolve_run_id, store, run_id)
    except NotFoundError:
        return run_id


RunId = Annotated[str, Depends(whole_run_id)]
IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", description="Same key + same body: the first response."),
]
REPLAYED: Final = "Idempotent-Replayed"
EVENTS: Final = (
    "event: case\nid: 0\n"
    'data: {"case_id": "window-40-days", "status": "fail", "score": 0.5, "label": "…"}\n\n'
    'event: progress\ndata: {"chunks_done": 1, "chunks": 1, "cases_done": 50, "cases": 50}\n\n'
    'event: summary\ndata: {"run_id": "…", "passed": false, "pass_rate": 0.72, "…": "…"}\n\n'
)
"""The example of an event stream in the OpenAPI document."""


def run_id_of(outcome: EvalResult | GateRun) -> str:
    """The run id of what a flow returned."""
    return outcome.run_id if isinstance(outcome, EvalResult) else outcome.decision.run_id


PREFER_ASYNC: Final = "respond-async"


def prefers_async(prefer: str | None) -> bool:
    """Whether a `Prefer` header (RFC 7240) asks for `respond-async`."""
    tokens = (part.split(";")[0].strip().lower() for part in (prefer or "").split(","))
    return PREFER_ASYNC in tokens


class Submission:
    """An operator's run submission: run once per Idempotency-Key, in the bounded pool; with
    `Prefer: respond-async`, accepted at once (202) and run in the background."""

    def __init__(
        self,
        request: Request,
        response: Response,
        store: Store,
        _: Operator,
        token: Token,
        idempotency_key: IdempotencyKey = None,
        prefer: Annotated[
            str | None,
            Header(
                alias="Prefer",
                description="`respond-async`: answer 202 with the run's id and `Location` at "
                "once, instead of the result when the run ends.",
            ),
        ] = None,
    ) -> None:
        self.store = store
        self.local = is_local(request, token)
        self._state = request.app.state
        self._response = response
        self._key = idempotency_key
        self.respond_async = prefers_async(prefer)

    async def run(self, body: RunRequest, flow: FlowName) -> str:
        """Run `body` in `flow` (until it ends, or until accepted when `respond_async`);
        returns the run id and marks a replayed response with `Idempotent-Replayed: true`."""
        if self.local:  # the machine's user: its own paths, for outputs and a suite file
            body = await run_in_threadpool(body.with_published_suite, self.store)
        else:
            body.refuse_local_outputs()
        pool: RunPool = self._state.pool
        accepted: AcceptedRuns = self._state.accepted

        async def work() -> str:
            if self.respond_async:
                return await accepted.accept(body, flow)
            outcome = await until_recorded(pool, self.store, body, flow)
            return run_id_of(outcome)

        if self._key is None:
            return await work()
        idempotency: Idempotency = self._state.idempotency
        run_id, replayed = await idempotency.once(flow, self._key, body, work)
        if replayed:
            self._response.headers[REPLAYED] = "true"
        return run_id

    async def accepted(self, run_id: str) -> JSONResponse:
        """202 with the run's state, `Location: /runs/{id}` and `Preference-Applied`."""
        accepted: AcceptedRuns = self._state.accepted
        state = await run_in_threadpool(accepted.state, run_id)
        headers = {
            "Location": f"/runs/{run_id}",
            "Preference-Applied": PREFER_ASYNC,
            **{
                name: value
                for name, value in self._response.headers.items()
                if name == REPLAYED.lower()
            },
        }
        return JSONResponse(state.model_dump(mode="json"), status_code=202, headers=headers)


Submit = Annotated[Submission, Depends()]

PlanQuery = Annotated[
    bool,
    Query(
        description="Answer the run's cost plan (200: judge calls after cache hits, tokens, "
        "cost sync and batch, each budget's headroom, whether it would be blocked) instead of "
        "running it: no judge is called, no flow starts, nothing is written.",
    ),
]
PLANNED: Final[dict[int | str, dict[str, Any]]] = {
    200: {"model": CostPlan, "description": "`plan=true`: the run's cost plan (nothing run)"}
}


def _cost_plan(submission: Submission, body: RequestBody, flow: FlowName) -> CostPlan:
    """The cost plan of `body` in `flow`, judged as a run launched here would be: a suite file
    (the local service's user only) is read, not published; inline outputs are staged for as
    long as it reads them."""
    from blocks.judge_settings import judge_setup

    if not submission.local:
        body.refuse_local_outputs()
    subject_param(body.subject)

    def planned(outputs: str) -> CostPlan:
        options = body.options(submission.store, outputs, flow)
        setup = judge_setup(options.judge_block, options.fresh_judge, options.judge_repeats)
        return plan_run(submission.store, options, setup, suite_files=submission.local)

    if body.outputs_uri is not None:
        return planned(body.outputs_uri)
    with staging.staged(body.staged_bytes()) as reference:
        return planned(reference)


async def answered(submission: Submission, body: RequestBody, flow: FlowName, plan: bool) -> Any:
    """The route's answer to a plan (200, nothing run), else None: the run goes ahead."""
    if not plan:
        return None
    found = await run_in_threadpool(_cost_plan, submission, body, flow)
    return JSONResponse(found.model_dump(mode="json"))


ACCEPTED: Final[dict[int | str, dict[str, Any]]] = {
    202: {
        "model": RunState,
        "description": "`Prefer: respond-async`: accepted; follow `Location` or "
        "`/runs/{id}/events`",
        "headers": {
            "Location": {"description": "`/runs/{run_id}`", "schema": {"type": "string"}},
            "Preference-Applied": {"schema": {"type": "string", "enum": [PREFER_ASYNC]}},
        },
    }
}


@router.post("/runs", response_model=EvalResult, status_code=201, responses=ACCEPTED | PLANNED)
async def create_run(body: RunRequest, submission: Submit, plan: PlanQuery = False) -> Any:
    """Score outputs (inline, never stored; or `outputs_uri`) in the suite-run flow and return
    the EvalResult (201). With `Prefer: respond-async`: 202 with the run id as soon as the run
    has started (or waits for a slot). Runs wait for a free slot; a full queue is 429 with
    Retry-After. With `plan=true`: 200 with the run's cost plan, and nothing run."""
    planned = await answered(submission, body, "suite-run", plan)
    if planned is not None:
        return planned
    run_id = await submission.run(body, "suite-run")
    if submission.respond_async:
        return await submission.accepted(run_id)
    return await run_in_threadpool(load_result, submission.store, run_id)


def _filtered_runs(
    accepted: AcceptedRuns, suite: str | None, subject: str | None
) -> list[RunAggregate]:
    return [
        accepted.settled(run)
        for run in list_runs(accepted.store)
        if (suite is None or run.suite == suite)
        and (subject is None or subject in (run.subject, f"{run.subject_kind}:{run.subject_id}"))
    ]


@router.get("/runs", response_model=Page[RunAggregate])
async def runs(
    request: Request,
    _: Viewer,
    suite: str | None = None,
    subject: Annotated[str | None, Query(description="KIND:ID (all variants) or KIND:ID@V")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page[RunAggregate]:
    """Recorded runs, newest first, each as it is (a `running` run whose process is gone:
    `interrupted`, as `GET /runs/{id}` says): `{"items": [...], "next_cursor": ...}`."""
    found = await run_in_threadpool(_filtered_runs, request.app.state.accepted, suite, subject)
    return paginate(found, lambda run: sort_key(run.started_at, run.run_id), limit, cursor)


@router.get(
    "/runs/{run_id}",
    response_model=EvalResult,
    responses={
        202: {
            "model": RunState,
            "description": "Queued or running: its state (chunks done of chunks)",
            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        }
    },
)
async def run(run_id: RunId, request: Request, store: Store, _: Viewer) -> Any:
    """The EvalResult of a completed run (200); 202 with its state while it is queued or
    running; 409 when it failed or was interrupted."""
    accepted: AcceptedRuns = request.app.state.accepted
    state = await run_in_threadpool(accepted.state, run_id)
    if state.status in ("queued", "running"):
        return JSONResponse(
            state.model_dump(mode="json"), status_code=202, headers={"Retry-After": "1"}
        )
    if state.status != "completed":
        raise _not_completed(state)
    return await run_in_threadpool(load_result, store, run_id)


def _refuse_unless_completed(accepted: AcceptedRuns, run_id: str) -> None:
    state = accepted.state(run_id)
    if state.status != "completed":
        raise _not_completed(state)


def _not_completed(state: RunState) -> Problem:
    return Problem(
        409,
        f"run {state.run_id} is {state.status}" + (f": {state.error}" if state.error else ""),
        kind="run-not-completed",
        run_status=state.status,
    )


@router.get("/runs/{run_id}/cases", response_model=Page[CaseResult])
async def run_cases(
    run_id: RunId,
    request: Request,
    store: Store,
    _: Viewer,
    status: Annotated[
        CaseFilter | None, Query(description="Only passed, failed (errors too), skipped or error.")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page[CaseResult]:
    """Each case of a completed run in evidence order — id, status, score, label and its
    checks `{scorer, kind, status, score, label}`, a conversation's `turns` `{turn, status,
    score, label, missing, checks}` and `record_turns` — as `assay runs cases --json` lists
    them; `{"items": [...], "next_cursor": ...}`. No output text. 409 until the run is
    completed."""
    scope = f"{run_id}\n{status or ''}"
    after = decode_position(cursor, scope)

    def page() -> Page[CaseResult]:
        _refuse_unless_completed(request.app.state.accepted, run_id)
        items, last = case_page(store, run_id, status, limit, after)
        return Page[CaseResult](
            items=items, next_cursor=None if last is None else encode_position(last, scope)
        )

    return await run_in_threadpool(page)


def _frame(event: str, data: str, ident: int | None = None) -> str:
    return (
        f"event: {event}\n" + (f"id: {ident}\n" if ident is not None else "") + f"data: {data}\n\n"
    )


def _case_data(case: CaseEvidence) -> str:
    """A `case` frame: id, status, score, label, and a conversation's turn verdicts (without
    their checks: `GET /runs/{id}/cases` has those)."""
    frame: dict[str, Any] = {
        "case_id": case.case_id,
        "status": case.status,
        "score": case.score,
        "label": case.label,
    }
    if case.turns is not None:
        frame["turns"] = [turn.model_dump(mode="json", exclude={"checks"}) for turn in case.turns]
        frame["record_turns"] = case.record_turns
    return json.dumps(frame)


FOLLOW_POLL_SECONDS: Final = 0.2
"""How often a live stream reads the run's aggregate for newly finished chunks."""


def _chunk_frames(
    store: EvidenceStore, run_id: str, chunk: int, first: int, after: int
) -> tuple[str, int]:
    """The `case` frames of one chunk, numbered from `first` (those up to `after` left out),
    and how many cases it holds."""
    cases = read_chunk(store, run_id, chunk).cases
    frames = "".join(
        _frame("case", _case_data(case), first + offset)
        for offset, case in enumerate(cases)
        if first + offset > after
    )
    return frames, len(cases)


KEEPALIVE: Final = ": keep-alive\n\n"
"""An SSE comment line: clients ignore it; proxies that close idle connections (nginx's
`proxy_read_timeout` is 60 s) see traffic while a queued run waits or a long chunk is judged."""


async def _follow(
    store: EvidenceStore, accepted: AcceptedRuns, run_id: str, after: int, keepalive: float
) -> AsyncIterator[str]:
    """The run's cases chunk by chunk in the order its chunks finished (so `id:` numbers them
    the same way on every connection), `progress` while it runs, then `summary` (or `error`:
    the run failed, or the store stopped answering mid-stream); a comment line after each
    `keepalive` seconds without a frame."""
    try:
        async for frames in _frames(store, accepted, run_id, after, keepalive):
            yield frames
    except StoreUnavailableError as exc:
        detail = without_store_location(str(exc), store)
        yield _frame("error", json.dumps({"run_id": run_id, "status": "unknown", "error": detail}))


async def _frames(
    store: EvidenceStore, accepted: AcceptedRuns, run_id: str, after: int, keepalive: float
) -> AsyncIterator[str]:
    silent_since = time.monotonic()
    sent_chunks = 0
    numbered = 0
    reported: int | None = None
    while True:
        state = await run_in_threadpool(accepted.state, run_id)
        aggregate = None
        if state.status != "queued":
            aggregate = await run_in_threadpool(_aggregate_or_none, store, run_id)
        if aggregate is not None:
            for chunk in finished_chunks(aggregate)[sent_chunks:]:
                frames, cases = await run_in_threadpool(
                    _chunk_frames, store, run_id, chunk, numbered, after
                )
                numbered += cases
                sent_chunks += 1
                if frames:
                    silent_since = time.monotonic()
                    yield frames
            # A follower that saw the run running also sees its last chunks counted, even when
            # they finished between two polls; a replay of a finished run has no progress.
            live = aggregate.status is RunStatus.RUNNING or (
                reported is not None and aggregate.status is RunStatus.COMPLETED
            )
            if live and aggregate.chunks_done != reported:
                reported = aggregate.chunks_done
                progress = {
                    "chunks_done": aggregate.chunks_done,
                    "chunks": aggregate.chunks,
                    "cases_done": numbered,
                    "cases": aggregate.cases,
                }
                silent_since = time.monotonic()
                yield _frame("progress", json.dumps(progress))
        if state.status == "completed":
            result = await run_in_threadpool(load_result, store, run_id)
            yield _frame("summary", result.model_dump_json())
            return
        if state.status in ("failed", "interrupted"):
            yield _frame("error", state.model_dump_json())
            return
        if time.monotonic() - silent_since >= keepalive:
            silent_since = time.monotonic()
            yield KEEPALIVE
        await anyio.sleep(min(FOLLOW_POLL_SECONDS, keepalive))


def _aggregate_or_none(store: EvidenceStore, run_id: str) -> RunAggregate | None:
    try:
        return load_aggregate(store, run_id)
    except NotFoundError:
        return None


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {"schema": {"type": "string"}, "example": EVENTS}},
            "description": "`case` frames, `progress` frames while the run runs, then "
            "`summary` (or `error`)",
        }
    },
)
async def run_events(
    run_id: RunId,
    request: Request,
    _: Viewer,
    last_event_id: Annotated[
        int | None, Header(alias="Last-Event-ID", ge=0, description="Resume after this case.")
    ] = None,
) -> StreamingResponse:
    """Follow a run as Server-Sent Events: one `case` event per case (`id:` numbers the cases
    in the order their chunks finished; a conversation's carries its `turns`, each `{turn,
    status, score, label}` (`missing` when the record ended before it) and `record_turns`) as
    its chunks finish, a `progress` event (`chunks_done`/`chunks`) after each, then one
    `summary` event (the EvalResult) and the stream closes; a finished run is replayed the same way.
    `Last-Event-ID` resumes after that case. Nothing is scored for the stream, and a client
    that leaves costs the run nothing."""
    accepted: AcceptedRuns = request.app.state.accepted
    state = await run_in_threadpool(accepted.state, run_id)
    if state.status in ("failed", "interrupted"):
        raise _not_completed(state)
    after = -1 if last_event_id is None else last_event_id
    return StreamingResponse(
        _follow(
            accepted.store, accepted, run_id, after, request.app.state.settings.keepalive_seconds
        ),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )
