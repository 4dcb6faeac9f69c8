"""ASGI middleware of the service: the access log, the body limit, and the last-resort 500.

The access log carries method, path, status and duration — never the query string, headers or
body (a body may hold candidate outputs, a header a token). The body limit answers 413 before a
route reads more than `max_body` bytes, whether or not the client sent Content-Length.
"""

from __future__ import annotations

import logging
import time
from typing import Final

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from assay.api.problems import problem_response, unexpected

access_log = logging.getLogger("assay.api.access")

_SAFE_PATH_CHARS: Final = 200
_DRAIN_LIMIT_FACTOR: Final = 4


class _BodyTooLargeError(HTTPException):
    """Raised while a route reads the body; an HTTPException, so the framework answers it."""

    def __init__(self, max_body: int) -> None:
        limit_mb = max_body / (1024 * 1024)
        super().__init__(413, f"the request body is larger than the limit of {limit_mb:g} MB")


class ServiceMiddleware:
    """One pass over every HTTP request: limit the body, catch the unexpected, log the access."""

    def __init__(self, app: ASGIApp, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0
        response_started = False

        async def sending(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = int(message["status"])
                response_started = True
            await send(message)

        received = 0

        async def receiving() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    raise _BodyTooLargeError(self.max_body)
            return message

        try:
            if self._declared_length(scope) > self.max_body:
                await self._drain(receive)
                too_large = _BodyTooLargeError(self.max_body)
                await problem_response(413, too_large.detail)(scope, receive, sending)
                return
            await self.app(scope, receiving, sending)
        except Exception as exc:
            if not response_started:
                await unexpected(exc)(scope, receive, sending)
        finally:
            path = str(scope.get("path", ""))[:_SAFE_PATH_CHARS]
            access_log.info(
                "%s %s %d %.1fms",
                scope.get("method", "-"),
                path,
                status,
                (time.perf_counter() - started) * 1000,
            )

    async def _drain(self, receive: Receive) -> None:
        """Read and drop what the client is sending (up to a bound), so that it gets to read
        the 413 instead of a reset connection."""
        dropped = 0
        while dropped <= _DRAIN_LIMIT_FACTOR * self.max_body:
            message = await receive()
            dropped += len(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body", False):
                return

    @staticmethod
    def _declared_length(scope: Scope) -> int:
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    return int(value)
                except ValueError:
                    return 0
        return 0
