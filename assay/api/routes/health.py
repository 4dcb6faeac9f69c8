"""`GET /healthz` (no token): whether the service, its store and the Prefect API answer; and
`GET /livez` (no token): whether the service answers at all, asking nothing else.

The store answers when it lists *and* takes a write: a full or read-only store still lists, and
a service whose every write answers 503 is not healthy. The probe overwrites one tiny object,
`HEALTH_PROBE`, holding no run data.
"""

from __future__ import annotations

import asyncio
from typing import Final, Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store

router = APIRouter(tags=["health"])
HEALTH_PROBE: Final = "healthz/probe"


class Health(BaseModel):
    """`ok` when the store (reads and writes) and the Prefect API both answer, else `degraded`
    (HTTP 503)."""

    status: Literal["ok", "degraded"]
    store: bool
    prefect: bool


class Liveness(BaseModel):
    """The service answers HTTP (`alive`): what a client asks before a request whose answer
    may take long to come (a waited-for run), without the probes of `/healthz`."""

    status: Literal["alive"] = "alive"


def _store_answers(store: Store) -> bool:
    try:
        # A listing, not a HEAD: S3 answers a HEAD in a missing bucket with a bare 404, which
        # reads as "no such object" from a store that cannot be used at all.
        next(iter(store.list("healthz/")), None)
        store.put(HEALTH_PROBE, b"ok")
    except Exception:
        return False
    return True


def prefect_answers() -> bool:
    """Whether the Prefect API answers its health check, asked with this thread's lasting
    client (`flows.local`): a client made per probe loads the CA bundle, 15–35 ms of the
    `/healthz` a command sends before its run."""
    from prefect.client.orchestration import get_client

    from flows.launch import in_this_process

    with in_this_process(), get_client(sync_client=True) as client:
        return client.api_healthcheck() is None


def _prefect() -> bool:
    try:
        return prefect_answers()
    except Exception:
        return False


@router.get("/livez", response_model=Liveness)
async def livez() -> Liveness:
    """Liveness only: the service answers (no store or Prefect probe)."""
    return Liveness()


@router.get("/healthz", response_model=Health, responses={503: {"model": Health}})
async def healthz(store: Store) -> JSONResponse:
    """Liveness and readiness: the store and the Prefect API each answer or not (asked side
    by side)."""
    store_ok, prefect_ok = await asyncio.gather(
        run_in_threadpool(_store_answers, store), run_in_threadpool(_prefect)
    )
    health = Health(
        status="ok" if store_ok and prefect_ok else "degraded", store=store_ok, prefect=prefect_ok
    )
    return JSONResponse(health.model_dump(), status_code=200 if health.status == "ok" else 503)
