"""`POST /v1/traces`: the OTLP/HTTP trace endpoint of `assay serve`, as a FastAPI router.

Answers follow the OTLP/HTTP specification: 200 with an `ExportTraceServiceResponse` in the
request's encoding (`partialSuccess` {rejectedSpans, errorMessage} when root spans were
rejected); 400 for a body that is not a trace export (permanent: exporters do not retry it);
415 for another content type or encoding; 503 with `Retry-After` when the store cannot take the
signals (exporters retry 503). Error bodies are RFC 9457 problem+json like every other route of
the service; OTLP exporters act on the status code. Authorisation is the service's bearer-token
dependency (operator tier), given when the router is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from assay.otel.receiver import (
    MalformedRequest,
    UnsupportedMediaType,
    media_type,
    receive,
    response_body,
)
from assay.otel.signals import PendingUsage
from assay.store import EvidenceStore, StoreUnavailableError

MAX_DECOMPRESSED: Final = 64 * 1024 * 1024
"""Largest body after gzip; the service's own body limit applies to what is sent."""
RETRY_AFTER_SECONDS: Final = 5


def _problem(status: int, title: str, detail: str, **headers: str) -> JSONResponse:
    return JSONResponse(
        {"type": "about:blank", "title": title, "status": status, "detail": detail},
        status_code=status,
        media_type="application/problem+json",
        headers=headers,
    )


def otlp_router(authorize: Callable[..., Any]) -> APIRouter:
    """The router; `authorize` is the dependency that admits operator-tier callers."""
    router = APIRouter(tags=["otlp"])
    pending = PendingUsage()

    @router.post(
        "/v1/traces",
        dependencies=[Depends(authorize)],
        summary="OTLP/HTTP trace export: each finished root span becomes a session signal",
        response_class=Response,
    )
    async def export_traces(request: Request) -> Response:
        store: EvidenceStore = request.app.state.store
        content_type = request.headers.get("content-type")
        try:
            kind = media_type(content_type)
            body = await request.body()
            receipt = await run_in_threadpool(
                receive,
                store,
                body,
                content_type,
                request.headers.get("content-encoding"),
                pending,
                limit=MAX_DECOMPRESSED,
            )
        except UnsupportedMediaType as exc:
            return _problem(415, "Unsupported media type", str(exc))
        except MalformedRequest as exc:
            return _problem(400, "Bad request", f"not an OTLP trace export: {exc}")
        except StoreUnavailableError:
            return _problem(
                503,
                "Service unavailable",
                "the evidence store cannot take the signals now; retry",
                **{"Retry-After": str(RETRY_AFTER_SECONDS)},
            )
        return Response(response_body(receipt, kind), media_type=kind)

    return router
