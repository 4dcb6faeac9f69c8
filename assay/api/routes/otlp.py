"""`POST /v1/traces`: the OTLP/HTTP trace endpoint (operator tier) that feeds the monitor.

The domain is `assay.monitor.receiver`; this module only speaks HTTP. Answers follow the OTLP/HTTP
specification: 200 with an `ExportTraceServiceResponse` in the request's encoding
(`partialSuccess` {rejectedSpans, errorMessage} when root spans were rejected); 400 for a body
that is not a trace export (permanent: exporters do not retry it); 415 for another content type
or encoding; 413 over the body limit and 503 when the store cannot take the signals (exporters
retry 503), both from the service's middleware and handlers. Error bodies are problem+json like
every other route; OTLP exporters act on the status code.
"""

from __future__ import annotations

from typing import Final

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Operator, Store
from assay.api.problems import Problem, documented
from assay.monitor.receiver import (
    MalformedRequest,
    UnsupportedMediaType,
    media_type,
    receive,
    response_body,
)
from assay.monitor.spans import PendingUsage
from assay.process_state import remembered

MAX_DECOMPRESSED: Final = 64 * 1024 * 1024
"""Largest body after gzip; the service's body limit applies to what is sent."""

router = APIRouter(tags=["otlp"], responses=documented(401, 403, 413, 503))

_pending = PendingUsage()
"""Child spans' usage waiting for their root span, in this server process."""
remembered(__name__, "_pending", _pending.clear)


@router.post(
    "/v1/traces",
    summary="OTLP/HTTP trace export: each finished root span becomes a session signal",
    response_class=Response,
)
async def export_traces(request: Request, store: Store, _caller: Operator) -> Response:
    """Decode the spans, append one session signal per finished root span; keep no text."""
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
            _pending,
            limit=MAX_DECOMPRESSED,
        )
    except UnsupportedMediaType as exc:
        raise Problem(415, str(exc), kind="unsupported-media-type") from None
    except MalformedRequest as exc:
        raise Problem(400, f"not an OTLP trace export: {exc}", kind="bad-otlp") from None
    return Response(response_body(receipt, kind), media_type=kind)
