"""Embeddings: a small port and one OpenAI-compatible adapter, for the consistency dimension.

The outcome score's consistency dimension (SPEC §11) compares each response's embedding with
the centroid of its query class. Like the judge, the embedder is the only model Assay calls
(SPEC §1.1), it talks to `POST {base_url}/embeddings` through the official `openai` SDK with the
SDK's own retries off, and tenacity owns the bounded, jittered retries (429 honouring
`Retry-After`, 408/409, 5xx, timeouts, connection errors), the same policy as the judge
(`assay.judge.openai_adapter.is_transient`, `retry_after_seconds`).

**Fail closed.** An embedder never raises for a failed request: `embed` returns an
`Embeddings` with no vectors and the reason (`embeddings unavailable: <ErrorType>`), and the
caller reports consistency as unavailable for those responses — never as a score.

**Redaction.** Texts go through the judge's redaction settings (`assay.judge.redaction`)
before they are sent, like every judge prompt; `Embeddings.redactions` counts what was replaced.

**Minimal data.** The texts exist only in this call's memory; nothing here logs them or puts
them in a reason (only exception type names are used: server error bodies may echo requests).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Protocol

import tenacity
from openai import APIStatusError, DefaultHttpxClient, OpenAI

from assay.judge.endpoint import (
    API_KEY_ENV,
    BASE_URL_ENV,
    DEFAULT_BASE_URL,
    api_key_for,
    is_transient,
    retry_after_seconds,
    tls_context,
)
from assay.judge.redaction import NO_REDACTION, RedactionSettings, Redactor, add_counts

logger = logging.getLogger(__name__)

EMBEDDING_MODEL_ENV: Final = "ASSAY_EMBEDDING_MODEL"
NO_EMBEDDER: Final = "no embedding model configured"
NO_EMBEDDING_CREDENTIALS: Final = "no credentials"
UNAVAILABLE_PREFIX: Final = "embeddings unavailable: "
BATCH_TEXTS: Final = 128
"""Texts per embeddings request (well under every provider's per-request limit)."""


@dataclass(frozen=True)
class Embeddings:
    """The embeddings of a batch of texts, or why there are none.

    Attributes:
        vectors: One vector per text, in order; None when the batch could not be embedded.
        reason: Why `vectors` is None (`embeddings unavailable: <ErrorType>`, a malformed
            reply); None on success.
    """

    vectors: list[list[float]] | None
    reason: str | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    """Spans redacted per kind from the texts before they were sent (counts only)."""


class Embedder(Protocol):
    """An embedding model behind some API; never raises for a failed request."""

    @property
    def model(self) -> str:
        """The model pin, recorded with the report (vectors of different models never mix)."""
        ...

    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed `texts` (one vector each, in order), or say why not."""
        ...


class MalformedEmbeddings(ValueError):
    """A reply that is not one finite, non-empty vector per text, all of one length."""


class OpenAIEmbedder:
    """An `Embedder` behind any OpenAI-compatible `/v1/embeddings` endpoint.

    Args:
        model: The embedding model pin (`text-embedding-3-small`, a vLLM/Ollama model, …).
        base_url: The API root; default `OPENAI_BASE_URL`, else OpenAI's.
        api_key: Default `OPENAI_API_KEY`.
        timeout: Seconds one request may take.
        max_attempts: Attempts per batch, retries included (>= 1).
        deadline_seconds: Time budget per batch: no attempt starts once the next wait would
            cross it.
        backoff_seconds: Base of the full-jitter exponential backoff.
        max_backoff_seconds: Ceiling of one backoff wait (a `Retry-After` is honoured as sent).
        redaction: What is replaced by placeholders before texts are sent (the judge's).

    Raises:
        ValueError: No model, no API key, or a bound that is not positive.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        max_attempts: int = 5,
        deadline_seconds: float = 60.0,
        *,
        backoff_seconds: float = 0.5,
        max_backoff_seconds: float = 8.0,
        redaction: RedactionSettings = NO_REDACTION,
    ) -> None:
        key = api_key_for("OpenAIEmbedder", model, api_key, timeout, deadline_seconds, max_attempts)
        self._model = model
        self.base_url = (base_url or os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL).rstrip("/")
        self.redactor = Redactor(redaction)
        self.max_attempts = max_attempts
        self.deadline_seconds = deadline_seconds
        self._backoff = tenacity.wait_random_exponential(
            multiplier=backoff_seconds, max=max_backoff_seconds
        )
        self._client = OpenAI(
            api_key=key,
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout,
            http_client=DefaultHttpxClient(verify=tls_context()),
        )

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(model={self._model!r})"

    @property
    def model(self) -> str:
        """The embedding model pin."""
        return self._model

    def close(self) -> None:
        """Close the SDK client's connection pool."""
        self._client.close()

    def embed(self, texts: Sequence[str]) -> Embeddings:
        """Embed `texts` in batches of `BATCH_TEXTS`; any failed batch fails the whole call.

        Returns:
            One vector per text, or no vectors and the reason (never raises for a failure).
        """
        vectors: list[list[float]] = []
        redacted = [self.redactor.redact(text) for text in texts]
        counts: dict[str, int] = {}
        for done in redacted:
            counts = add_counts(counts, done.counts)
        for start in range(0, len(texts), BATCH_TEXTS):
            batch = [done.text for done in redacted[start : start + BATCH_TEXTS]]
            retrying = tenacity.Retrying(
                retry=tenacity.retry_if_exception(is_transient),
                stop=tenacity.stop_after_attempt(self.max_attempts)
                | tenacity.stop_before_delay(self.deadline_seconds),
                wait=self._wait,
                reraise=True,
            )
            try:
                batch_vectors = retrying(self._request, batch)
            except Exception as exc:  # a failure is "unavailable" with its type, never a score
                reason = UNAVAILABLE_PREFIX + type(exc).__name__
                logger.warning(
                    "embeddings %s: %d text(s) not embedded (%s)", self._model, len(texts), reason
                )
                return Embeddings(None, reason, counts)
            vectors.extend(batch_vectors)
        return Embeddings(vectors, redactions=counts)

    def _request(self, batch: list[str]) -> list[list[float]]:
        reply = self._client.embeddings.create(model=self._model, input=batch)
        data = sorted(reply.data, key=lambda item: item.index)
        vectors = [list(item.embedding) for item in data]
        if len(vectors) != len(batch) or not vectors[0]:
            raise MalformedEmbeddings("not one vector per text")
        width = len(vectors[0])
        if any(len(v) != width or not all(math.isfinite(x) for x in v) for v in vectors):
            raise MalformedEmbeddings("vectors differ in length or hold non-finite values")
        return vectors

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """The server's `Retry-After` when it sent one, else full-jitter exponential backoff."""
        exc = state.outcome.exception() if state.outcome is not None else None
        if isinstance(exc, APIStatusError):
            asked = retry_after_seconds(exc.response.headers)
            if asked is not None:
                return asked
        return float(self._backoff(state))


def embedder_skip_reason(
    environ: Mapping[str, str] | None = None, api_key: str | None = None
) -> str | None:
    """Why no embedder is configured: no `ASSAY_EMBEDDING_MODEL`, or no key; None when both are.

    Args:
        environ: Where to read the settings; default `os.environ`.
        api_key: The judge's key when it comes from elsewhere (a JudgeSettings block).
    """
    env = os.environ if environ is None else environ
    if not env.get(EMBEDDING_MODEL_ENV, "").strip():
        return NO_EMBEDDER
    if not (api_key or env.get(API_KEY_ENV, "").strip()):
        return NO_EMBEDDING_CREDENTIALS
    return None
