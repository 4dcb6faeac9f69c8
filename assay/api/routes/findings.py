"""`GET /findings`: recorded findings, newest first, cursor-paginated."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store, Viewer
from assay.api.pagination import DEFAULT_LIMIT, MAX_LIMIT, Page, paginate, sort_key
from assay.api.problems import AUTHENTICATED
from assay.findings import Finding, list_findings
from assay.store import EvidenceStore

router = APIRouter(tags=["findings"], responses=AUTHENTICATED)


def _matching(
    store: EvidenceStore,
    suite: str | None,
    subject: str | None,
    kind: str | None,
    since: datetime | None,
) -> list[Finding]:
    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return [
        finding
        for finding in list_findings(store)
        if (suite is None or finding.suite == suite)
        and (subject is None or subject in (finding.subject, finding.subject.split("@")[0]))
        and (kind is None or finding.kind == kind)
        and (since is None or finding.occurred_at >= since)
    ]


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
    found = await run_in_threadpool(_matching, store, suite, subject, kind, since)
    return paginate(
        found, lambda f: sort_key(f.occurred_at, f"{f.run_id}/{f.kind}/{f.subject}"), limit, cursor
    )
