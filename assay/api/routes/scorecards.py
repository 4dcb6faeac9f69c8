"""`GET /scorecards`: per subject and suite, pass rates pooled and over time (JSON or CSV)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse, PlainTextResponse
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store, Viewer
from assay.api.problems import AUTHENTICATED
from assay.runs.scorecard import DEFAULT_TREND_RUNS, ScorecardRow, scorecard, to_csv

router = APIRouter(tags=["scorecards"], responses=AUTHENTICATED)


@router.get(
    "/scorecards",
    response_model=list[ScorecardRow],
    responses={200: {"content": {"text/csv": {}}, "description": "JSON rows, or CSV"}},
)
async def scorecards(
    store: Store,
    _: Viewer,
    subject: Annotated[str | None, Query(description="KIND:ID (all variants) or KIND:ID@V")] = None,
    suite: str | None = None,
    last: Annotated[int, Query(ge=3, description="Runs in the trend.")] = DEFAULT_TREND_RUNS,
    format: Literal["json", "csv"] = "json",
) -> JSONResponse | PlainTextResponse:
    """The scorecard rows; `format=csv` gives CSV with a header row."""
    rows = await run_in_threadpool(scorecard, store, subject, suite, last)
    if format == "csv":
        return PlainTextResponse(to_csv(rows), media_type="text/csv")
    return JSONResponse([row.model_dump(mode="json") for row in rows])
