"""`GET /findings`: recorded findings, newest first, cursor-paginated."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store, Viewer
from assay.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, Page, paginate, sort_key
from assay.api.problems import AUTHENTICATED
from assay.findings import Finding, matching_findings

router = APIRouter(tags=["findings"], responses=AUTHENTICATED)


@router.get("/findings", response_model=Page[Finding])
async def findings(
    store: Store,
    _: Viewer,
    suite: str | None = None,
    subject: Annotated[str | None, Query(description="KIND:ID (all variants) or KIND:ID@V")] = None,
    kind: Annotated[str | None, Query(description="e.g. eval_regression")] = None,
    since: Annotated[
        datetime | None, Query(description="ISO date or time (UTC if no zone)")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> Page[Finding]:
    """Findings, newest first: `{"items": [...], "next_cursor": ...}`."""
    found = await run_in_threadpool(matching_findings, store, suite, subject, kind, since)
    return paginate(
        found, lambda f: sort_key(f.occurred_at, f"{f.run_id}/{f.kind}/{f.subject}"), limit, cursor
    )
