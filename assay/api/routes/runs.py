"""Runs: submit a run (the suite-run flow), list runs, read one, replay it as Server-Sent Events."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Any, Final

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Operator, Store, Viewer
from assay.api.idempotency import Idempotency
from assay.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, Page, paginate, sort_key
from assay.api.problems import AUTHENTICATED, Problem, documented
from assay.api.runner import FlowName, RunPool, RunRequest, launch
from assay.gate.decision import GateRun
from assay.runs.records import (
    EvalResult,
    RunAggregate,
    RunStatus,
    list_runs,
    load_aggregate,
    load_result,
    read_cases,
)
from assay.runs.scoring import CaseEvidence
from assay.store import EvidenceStore

router = APIRouter(tags=["runs"], responses=AUTHENTICATED | documented(404, 409, 429))

RUN_ID: Final = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
RunId = Annotated[str, Path(pattern=RUN_ID, description="The run id (its Prefect flow run id).")]
IdempotencyKey = Annotated[
    str | None,
    Header(alias="Idempotency-Key", description="Same key + same body: the first response."),
]
REPLAYED: Final = "Idempotent-Replayed"


def run_id_of(outcome: EvalResult | GateRun) -> str:
    """The run id of what a flow returned."""
    return outcome.run_id if isinstance(outcome, EvalResult) else outcome.decision.run_id


class Submission:
    """An operator's run submission: run once per Idempotency-Key, in the bounded pool."""

    def __init__(
        self,
        request: Request,
        response: Response,
        store: Store,
        _: Operator,
        idempotency_key: IdempotencyKey = None,
    ) -> None:
        self.store = store
        self._state = request.app.state
        self._response = response
        self._key = idempotency_key

    async def run(self, body: RunRequest, flow: FlowName) -> str:
        """Run `body` in `flow`; returns the run id and marks a replayed response with
        `Idempotent-Replayed: true`."""
        pool: RunPool = self._state.pool

        async def work() -> str:
            outcome = await pool.run(lambda: launch(self.store, body, flow))
            return run_id_of(outcome)

        if self._key is None:
            return await work()
        idempotency: Idempotency = self._state.idempotency
        run_id, replayed = await idempotency.once(flow, self._key, body, work)
        if replayed:
            self._response.headers[REPLAYED] = "true"
        return run_id


Submit = Annotated[Submission, Depends()]


@router.post("/runs", response_model=EvalResult, status_code=201)
async def create_run(body: RunRequest, submission: Submit) -> EvalResult:
    """Score outputs (inline, never stored; or `outputs_uri`) in the suite-run flow and return
    the EvalResult. Runs wait for a free slot; a full queue is 429 with Retry-After."""
    run_id = await submission.run(body, "suite-run")
    return await run_in_threadpool(load_result, submission.store, run_id)


def _filtered_runs(store: EvidenceStore, suite: str | None, subject: str | None) -> list[Any]:
    return [
        run
        for run in list_runs(store)
        if (suite is None or run.suite == suite)
        and (subject is None or subject in (run.subject, f"{run.subject_kind}:{run.subject_id}"))
    ]


@router.get("/runs", response_model=Page[RunAggregate])
async def runs(
    store: Store,
    _: Viewer,
    suite: str | None = None,
    subject: Annotated[str | None, Query(description="KIND:ID (all variants) or KIND:ID@V")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page[RunAggregate]:
    """Recorded runs, newest first: `{"items": [...], "next_cursor": ...}`."""
    found = await run_in_threadpool(_filtered_runs, store, suite, subject)
    return paginate(found, lambda run: sort_key(run.started_at, run.run_id), limit, cursor)


@router.get("/runs/{run_id}", response_model=EvalResult)
async def run(run_id: RunId, store: Store, _: Viewer) -> EvalResult:
    """The EvalResult of a completed run; 409 while it runs or when it failed."""
    return await run_in_threadpool(_completed, store, run_id)


def _completed(store: EvidenceStore, run_id: str) -> EvalResult:
    aggregate = load_aggregate(store, run_id)
    if aggregate.status is not RunStatus.COMPLETED:
        raise Problem(
            409,
            f"run {run_id} is {aggregate.status}"
            + (f": {aggregate.error}" if aggregate.error else ""),
            kind="run-not-completed",
            run_status=aggregate.status.value,
        )
    return load_result(store, run_id)


def _frame(event: str, data: str, ident: int | None = None) -> str:
    return (
        f"event: {event}\n" + (f"id: {ident}\n" if ident is not None else "") + f"data: {data}\n\n"
    )


def _case_data(case: CaseEvidence) -> str:
    return json.dumps(
        {"case_id": case.case_id, "status": case.status, "score": case.score, "label": case.label}
    )


def _replay(store: EvidenceStore, result: EvalResult, after: int) -> Iterator[str]:
    for index, case in enumerate(read_cases(store, result.run_id)):
        if index > after:
            yield _frame("case", _case_data(case), index)
    yield _frame("summary", result.model_dump_json())


@router.get(
    "/runs/{run_id}/events",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "The replay"}},
)
async def run_events(
    run_id: RunId,
    store: Store,
    _: Viewer,
    last_event_id: Annotated[
        int | None, Header(alias="Last-Event-ID", ge=0, description="Resume after this case.")
    ] = None,
) -> StreamingResponse:
    """Replay a persisted run: one `case` event per case (`id:` is the case's index), then one
    `summary` event (the EvalResult), then the stream closes. Nothing is re-scored."""
    result = await run_in_threadpool(_completed, store, run_id)
    after = -1 if last_event_id is None else last_event_id
    return StreamingResponse(
        _replay(store, result, after),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache"},
    )
