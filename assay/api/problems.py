"""RFC 9457 problem details: every error the service answers is `application/problem+json`.

Assay's own errors map to statuses here, in one place: an input error is 422 with the same
file/line/field text the CLI prints, a missing suite or run 404, a write-once conflict 409, an
unreachable store 503. Validation problems name the field and never echo the input (a request
body may carry candidate outputs). Anything unexpected is a 500 that says nothing about the
request and logs the exception's type and frames, never its message.
"""

from __future__ import annotations

import errno
import logging
import traceback
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from assay import schemes
from assay.errors import EvidenceConflictError, InputError, NotFoundError
from assay.gate.access import AccessDeniedError
from assay.store import EvidenceStore, FileStore, StoreUnavailableError

MEDIA_TYPE: Final = "application/problem+json"
_TYPE_BASE: Final = "https://assay.dev/problems/"

log = logging.getLogger("assay.api")

_TITLES: Final = {
    400: "Bad request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Content too large",
    415: "Unsupported media type",
    422: "Invalid input",
    429: "Too many requests",
    500: "Internal server error",
    503: "Service unavailable",
}


STORE_RETRY_AFTER_SECONDS: Final = 10
"""Retry-After of a 503 for a store that did not answer (after its own bounded retries)."""


class ProblemDetails(BaseModel):
    """RFC 9457 problem details, as every error is answered (extensions vary by problem)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    field: str | None = None


_RETRY_AFTER: Final = {
    "Retry-After": {
        "description": "Seconds to wait before retrying (when retrying can help)",
        "schema": {"type": "integer"},
    }
}
_EXAMPLES: Final = {
    404: "no run 0b6f6c1e-5b9e-4d53-9a5e-2f1d3c0a7e21",
    422: "body.outputs.3.output: Field required",
    429: "20 runs are running or queued (limit 4 + 16); retry later",
    503: "the S3 endpoint http://minio:9000 does not answer (bucket evidence): check the "
    "endpoint URL and that the service is up",
}


def documented(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` declaring these statuses as problem+json (429 and 503 with
    `Retry-After`)."""
    return {
        status: {
            "model": ProblemDetails,
            "description": _TITLES.get(status, "Error"),
            "content": {
                MEDIA_TYPE: {
                    "schema": {"$ref": "#/components/schemas/ProblemDetails"},
                    **(
                        {
                            "example": {
                                "type": _TYPE_BASE + _TITLES[status].lower().replace(" ", "-"),
                                "title": _TITLES[status],
                                "status": status,
                                "detail": _EXAMPLES[status],
                            }
                        }
                        if status in _EXAMPLES
                        else {}
                    ),
                }
            },
            **({"headers": _RETRY_AFTER} if status in (429, 503) else {}),
        }
        for status in statuses
    }


AUTHENTICATED: Final = documented(401, 403, 413, 422, 503)
"""What any route behind a token may answer, besides its own statuses."""


class Problem(Exception):
    """An error answered as problem+json; routes raise it, the handler renders it."""

    def __init__(
        self,
        status: int,
        detail: str,
        *,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.kind = kind
        self.headers = headers or {}
        self.extensions = extensions


def problem_response(
    status: int,
    detail: str,
    *,
    kind: str | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    """A problem+json response (`type`, `title`, `status`, `detail`, and any extension)."""
    title = _TITLES.get(status, "Error")
    body = {
        "type": _TYPE_BASE + (kind or title.lower().replace(" ", "-")),
        "title": title,
        "status": status,
        "detail": detail,
        **{name: value for name, value in extensions.items() if value is not None},
    }
    return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)


def input_problem(exc: InputError) -> Problem:
    """An InputError as 422; inline outputs are named `outputs` (their reference is internal)."""
    if schemes.is_inline(exc.source):
        exc = InputError("outputs", exc.problem, line=exc.line, field=exc.field)
    return Problem(422, str(exc), kind="invalid-input", field=exc.field, line=exc.line)


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def validation_problem(errors: list[Any]) -> Problem:
    """Pydantic errors as 422 naming each field (`body.outputs.3.output: Field required`)."""
    listed = [
        {"field": _field(error["loc"]), "message": error["msg"].removeprefix("Value error, ")}
        for error in errors
    ]
    first = listed[0] if listed else {"field": "", "message": "invalid request"}
    if errors and errors[0]["type"] == "json_invalid":
        first = {"field": "body", "message": "malformed JSON"}
        listed = [first]
    detail = f"{first['field']}: {first['message']}" if first["field"] else first["message"]
    more = len(listed) - 1
    if more:
        detail += f" (and {more} more problem{'s' if more > 1 else ''})"
    return Problem(422, detail, kind="invalid-input", field=first["field"], errors=listed)


def _render(problem: Problem) -> JSONResponse:
    return problem_response(
        problem.status,
        problem.detail,
        kind=problem.kind,
        headers=problem.headers,
        **problem.extensions,
    )


def as_problem(exc: Exception) -> Problem | None:
    """The problem an Assay error stands for; None for an unexpected exception."""
    if isinstance(exc, Problem):
        return exc
    if isinstance(exc, InputError):
        return input_problem(exc)
    if isinstance(exc, NotFoundError):
        return Problem(404, str(exc), kind="not-found")
    if isinstance(exc, AccessDeniedError):
        return Problem(403, str(exc), kind="forbidden")
    if isinstance(exc, EvidenceConflictError):
        return Problem(409, str(exc), kind="conflict")
    if isinstance(exc, StoreUnavailableError):
        # A configuration error (a missing bucket, no credentials) gets no Retry-After: only
        # its fix helps, and the detail names it.
        retry = {"Retry-After": str(STORE_RETRY_AFTER_SECONDS)} if exc.retryable else None
        return Problem(503, str(exc), kind="store-unavailable", headers=retry)
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_input=False, include_url=False, include_context=False)
        return validation_problem(list(errors))
    if isinstance(exc, RecursionError):
        return Problem(422, "body: the document nests too deeply", kind="invalid-input")
    if isinstance(exc, OSError) and exc.errno == errno.ENAMETOOLONG:
        # A request's identifier became a store key longer than the file system allows.
        return Problem(422, "a name in the request is too long for the store", kind="invalid-input")
    if isinstance(exc, ValueError):
        # The domain raises ValueError for bad arguments (a key, a URI); the CLI's exit 2.
        return Problem(422, str(exc), kind="invalid-input")
    return None


def without_store_location(detail: str, store: EvidenceStore) -> str:
    """A detail with a file store's location (the service host's own path) left out; an S3
    store's bucket and endpoint stay, since they are what a caller must fix."""
    if not isinstance(store, FileStore):
        return detail
    for location in (store.uri, str(store.root)):
        detail = detail.replace(f" in {location}", "").replace(location, "the evidence store")
    return detail


def install(app: FastAPI) -> None:
    """Register the problem handlers on an app."""

    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        problem = as_problem(exc)
        if problem is None:
            return unexpected(exc)
        problem.detail = without_store_location(problem.detail, request.app.state.store)
        return _render(problem)

    async def on_http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return problem_response(
            exc.status_code, str(exc.detail), headers=dict(exc.headers or {}) or None
        )

    async def on_validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return _render(validation_problem(list(exc.errors())))

    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(RequestValidationError, on_validation)
    for kind in (Problem, InputError, NotFoundError, AccessDeniedError, EvidenceConflictError):
        app.add_exception_handler(kind, on_problem)
    app.add_exception_handler(StoreUnavailableError, on_problem)
    app.add_exception_handler(ValidationError, on_problem)
    app.add_exception_handler(ValueError, on_problem)
    app.add_exception_handler(RecursionError, on_problem)
    app.add_exception_handler(OSError, on_problem)


def unexpected(exc: BaseException) -> JSONResponse:
    """A 500 that says nothing about the request; the log gets the type and frames only (an
    exception's message could quote data)."""
    frames = "".join(traceback.format_tb(exc.__traceback__))
    log.error("unexpected %s (message withheld)\n%s", type(exc).__name__, frames)
    return problem_response(500, "the service failed; the error is in its log")
