"""An OpenAI-compatible endpoint: whether the environment configures one, where it is, which
failures are worth retrying, and how long the server asked to wait. Shared by the judge adapter
and the embedder.

The `openai` SDK (a few hundred milliseconds to import) is imported only by `is_transient` and
`LoopClients.client`, which run only once a judge exists: a run with no judge configured never
loads it.
"""

from __future__ import annotations

import asyncio
import functools
import math
import os
import ssl
import threading
import weakref
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit, urlunsplit

from assay.errors import InputError
from assay.judge.port import NO_CREDENTIALS, NO_JUDGE
from assay.process_state import remembered

if TYPE_CHECKING:
    from openai import AsyncOpenAI

API_KEY_ENV: Final = "OPENAI_API_KEY"
BASE_URL_ENV: Final = "OPENAI_BASE_URL"
MODEL_ENV: Final = "ASSAY_JUDGE_MODEL"
DEFAULT_BASE_URL: Final = "https://api.openai.com/v1"


def judge_skip_reason(environ: Mapping[str, str] | None = None) -> str | None:
    """Why the environment configures no judge: `no judge configured` (no `ASSAY_JUDGE_MODEL`),
    `no credentials` (no `OPENAI_API_KEY`), or None when both are set."""
    env = os.environ if environ is None else environ
    if not env.get(MODEL_ENV, "").strip():
        return NO_JUDGE
    if not env.get(API_KEY_ENV, "").strip():
        return NO_CREDENTIALS
    return None


def check_judge_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse an environment whose judge could never be called: an `OPENAI_API_KEY` that is not
    ASCII (a pasted placeholder such as `sk-…`) cannot go into an HTTP header, and every call
    would fail as `judge unavailable: UnicodeEncodeError`.

    Raises:
        InputError: Naming the variable (never its value).
    """
    env = os.environ if environ is None else environ
    if judge_skip_reason(env) is None and not env[API_KEY_ENV].isascii():
        raise InputError(
            API_KEY_ENV,
            "holds characters that are not ASCII (a pasted placeholder?): set the real key",
        )


TRANSIENT_STATUSES: Final = frozenset({408, 409, 429})
"""Retried besides every 5xx: timeout, conflict (OpenAI's lock contention), rate limit."""


def api_key_for(
    who: str,
    model: str,
    api_key: str | None,
    timeout: float,
    deadline_seconds: float,
    max_attempts: int,
) -> str:
    """The API key a client of `model` uses (given, else `OPENAI_API_KEY`), after checking the
    settings every OpenAI-compatible client needs.

    Raises:
        ValueError: No model, no API key, or a bound that is not positive.
    """
    if not model.strip():
        raise ValueError(f"{who} needs a model name")
    key = api_key if api_key is not None else os.environ.get(API_KEY_ENV)
    if not key:
        raise ValueError(f"{who} needs an API key: pass api_key or set {API_KEY_ENV}")
    if timeout <= 0 or deadline_seconds <= 0 or max_attempts < 1:
        raise ValueError("timeout and deadline_seconds must be positive, max_attempts >= 1")
    return key


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a server asked for, in seconds, or None when it did not ask (or asked nonsense).

    Reads `Retry-After-Ms` (OpenAI) first, then `Retry-After` as delay-seconds or as an HTTP
    date (RFC 9110 §10.2.3). A date in the past means 0.

    Args:
        headers: Response headers (case-insensitive mapping, as httpx gives them).
        now: The current time, for HTTP dates (tests); default: now.
    """
    milliseconds = headers.get("retry-after-ms")
    if milliseconds is not None:
        try:
            value = float(milliseconds) / 1000.0
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return max(0.0, value)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def is_transient(exc: BaseException) -> bool:
    """Whether the same request may succeed later: 408/409/429/5xx, timeouts, network errors."""
    from openai import APIConnectionError, APIStatusError

    if isinstance(exc, APIStatusError):
        return exc.status_code in TRANSIENT_STATUSES or exc.status_code >= 500
    return isinstance(exc, APIConnectionError)  # includes APITimeoutError


def congestion(exc: BaseException) -> str | None:
    """The kind of congestion a failed request met — `429`, `5xx` or `timeout` — or None when
    its failure says nothing about load (a rejection, a refused connection)."""
    from openai import APIStatusError, APITimeoutError

    if isinstance(exc, APIStatusError):
        if exc.status_code == 429:
            return "429"
        return "5xx" if exc.status_code >= 500 else None
    return "timeout" if isinstance(exc, APITimeoutError) else None


def redact_url(url: str) -> str:
    """A base URL for logs: no credentials, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


TIMEOUT_ENV: Final = "ASSAY_JUDGE_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_SECONDS: Final = 30.0
DEADLINE_ENV: Final = "ASSAY_JUDGE_DEADLINE_SECONDS"
DEFAULT_DEADLINE_SECONDS: Final = 60.0


def seconds_from_env(name: str, default: float) -> float:
    """A positive number of seconds from the environment variable `name`, else `default`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise ValueError(f"{name} must be a positive number of seconds, not {raw!r}")
    return value


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The SDK's default TLS context — its HTTP library's (`httpx2.create_ssl_context`: the
    system's trust store, or `SSL_CERT_FILE` / `SSL_CERT_DIR` as set when first made) — made
    once per process and shared by every SDK client Assay opens. A client left to make its own
    loads the CA bundle each time: 15–17 ms before the first call of every judged chunk (a new
    event loop, so a new client), also for a plain-HTTP endpoint on this host."""
    from httpx2 import create_ssl_context  # what openai's clients are built on (openai >= 3)

    return create_ssl_context()


remembered(__name__, "tls_context", tls_context.cache_clear)


class LoopClients:
    """One async SDK client per running event loop, for one endpoint and key: an HTTP
    connection pool belongs to the loop that opened it, and a judge is shared across threads
    and loops. A client's own retries are off: tenacity owns every retry."""

    def __init__(self, api_key: str, base_url: str, timeout: float) -> None:
        self._api_key, self._base_url, self._timeout = api_key, base_url, timeout
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def client(self) -> AsyncOpenAI:
        """The running loop's client, opened on first use."""
        from openai import AsyncOpenAI, DefaultAsyncHttpxClient

        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                client = AsyncOpenAI(
                    api_key=self._api_key,
                    base_url=self._base_url,
                    max_retries=0,
                    timeout=self._timeout,
                    http_client=DefaultAsyncHttpxClient(verify=tls_context()),
                )
                self._clients[loop] = client
            return client

    async def aclose(self) -> None:
        """Close the running loop's client (the others close with their loop)."""
        with self._lock:
            client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()
