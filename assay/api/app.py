"""The app factory: `create_app(settings)` builds the FastAPI service of `assay serve`.

The app starts from nothing its process remembered (`reset_process_state`, docs/architecture.md
"What a process remembers"); the store is opened once; the Prefect API is selected (and the
ephemeral one started) once, at start-up, off the event loop; every router is mounted; errors
are problem+json.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import ExitStack, asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from assay.api import docs, problems
from assay.api.idempotency import Idempotency
from assay.api.middleware import ServiceMiddleware
from assay.api.routes import (
    baselines,
    findings,
    gate,
    health,
    otlp,
    overrides,
    reports,
    runs,
    scorecards,
    suites,
)
from assay.api.runner import AcceptedRuns, RunPool, prefect_api, settle_interrupted_runs
from assay.api.settings import ServeSettings
from assay.process_state import reset_process_state
from assay.schemes import open_store
from assay.store import StoreUnavailableError

log = logging.getLogger("assay.api")

ROUTERS = (
    health.router,
    suites.router,
    runs.router,
    reports.router,
    baselines.router,
    gate.router,
    overrides.router,
    scorecards.router,
    findings.router,
    otlp.router,
)


def create_app(settings: ServeSettings | None = None) -> FastAPI:
    """The Assay HTTP service (SPEC §15)."""
    settings = settings or ServeSettings()
    reset_process_state()
    store = open_store(settings.store)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with ExitStack() as running:
            if settings.start_prefect:
                api = await run_in_threadpool(running.enter_context, prefect_api())
                app.state.prefect_api = api
                try:
                    await run_in_threadpool(settle_interrupted_runs, store)
                except StoreUnavailableError as exc:
                    # Serve anyway: every route answers 503 naming the store until it is back,
                    # and the next start settles what this one could not.
                    log.warning("interrupted runs not settled: %s", exc)
            yield

    app = FastAPI(
        title="Assay",
        summary="Score agent outputs against versioned golden suites, with honest evidence.",
        version="0.1.0",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.store = store
    app.state.pool = RunPool(settings.max_concurrent_runs, settings.max_queued_runs)
    app.state.accepted = AcceptedRuns(store, app.state.pool)
    app.state.idempotency = Idempotency(store)
    problems.install(app)
    docs.install(app)
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(ServiceMiddleware, max_body=settings.max_body_bytes)
    return app
