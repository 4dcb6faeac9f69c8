"""An OpenAI-compatible endpoint: whether the environment configures one, where it is, which
failures are worth retrying, and how long the server asked to wait. Shared by the judge adapter
and the embedder.

The `openai` SDK (a few hundred milliseconds to import) is imported only by `is_transient`,
which runs only once a client exists: a run with no judge configured never loads it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Final
from urllib.parse import urlsplit, urlunsplit

from assay.errors import InputError
from assay.judge.port import NO_CREDENTIALS, NO_JUDGE

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


def redact_url(url: str) -> str:
    """A base URL for logs: no credentials, query or fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
