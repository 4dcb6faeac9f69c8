"""`GET /runs/{id}/report`: a run's HTML report (the stored one, else built from its records)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store, Viewer
from assay.api.problems import AUTHENTICATED, documented
from assay.api.routes.runs import RunId
from assay.errors import NotFoundError
from assay.reports import report_key
from assay.reports.page import CONTENT_SECURITY_POLICY
from assay.store import EvidenceStore

router = APIRouter(tags=["reports"], responses=AUTHENTICATED | documented(404))


def _report(store: EvidenceStore, run_id: str) -> str:
    try:
        return store.get(report_key(run_id)).decode()
    except NotFoundError:  # a run finished before reports were written, or via another path
        from assay.reports.run import run_report  # matplotlib loads on the first such request

        return run_report(store, run_id)


@router.get(
    "/runs/{run_id}/report",
    response_class=HTMLResponse,
    responses={200: {"content": {"text/html": {}}, "description": "The self-contained page"}},
)
async def run_report_page(run_id: RunId, store: Store, _: Viewer) -> HTMLResponse:
    """The run's report: one self-contained HTML page, no output text; served with a content
    security policy that lets it run its own script and nothing else."""
    return HTMLResponse(
        await run_in_threadpool(_report, store, run_id),
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
        },
    )
