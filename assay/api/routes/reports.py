"""`GET /runs/{id}/report`: a run's HTML report (the stored one, else built from its records,
and kept once its flow has published it: `tasks.reports.publish_report`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store, Token, require_tier
from assay.api.problems import AUTHENTICATED, documented
from assay.api.routes.runs import RunId
from assay.errors import NotFoundError
from assay.reports import published_key, report_key
from assay.reports.link_key import KEY_CHARACTERS, opens_report
from assay.reports.page import CONTENT_SECURITY_POLICY
from assay.store import EvidenceStore

router = APIRouter(tags=["reports"], responses=AUTHENTICATED | documented(404))


def _report(store: EvidenceStore, run_id: str) -> str:
    """The stored page, else one built now: kept (write-once) when the run's flow has published
    its report, so the next request reads it. Before that — a gate still deciding on its suite
    run — the page is not final, and a run finished before reports were written has none."""
    try:
        return store.get(report_key(run_id)).decode()
    except NotFoundError:
        from assay.reports.run import run_report  # matplotlib loads on the first such request

        page = run_report(store, run_id)
        if store.exists(published_key(run_id)):
            store.put_once_if_absent(report_key(run_id), page.encode())
        return page


_VIEWER = require_tier("viewer")
LinkKey = Annotated[
    str | None,
    Query(
        max_length=KEY_CHARACTERS,
        description="The key of the run's report link (the Prefect UI's link carries it): "
        "opens this report to a browser, which sends no token.",
    ),
]


async def report_reader(
    request: Request, run_id: RunId, store: Store, token: Token, key: LinkKey = None
) -> None:
    """A viewer's token, or the key of this run's report link (`assay.reports.link_key`)."""
    if key is not None and await run_in_threadpool(opens_report, store, run_id, key):
        return
    await _VIEWER(request, store, token)


@router.get(
    "/runs/{run_id}/report",
    response_class=HTMLResponse,
    responses={200: {"content": {"text/html": {}}, "description": "The self-contained page"}},
)
async def run_report_page(
    run_id: RunId, store: Store, _: Annotated[None, Depends(report_reader)]
) -> HTMLResponse:
    """The run's report: one self-contained HTML page, no output text; served with a content
    security policy that lets it run its own script and nothing else. A viewer's token opens
    it, or the key its Prefect link carries."""
    return HTMLResponse(
        await run_in_threadpool(_report, store, run_id),
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
        },
    )
