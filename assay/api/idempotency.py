"""`Idempotency-Key` for the POSTs that run (`/runs`, `/gate`).

The same key with the same body returns the first response (the same run, no second one); the
same key with another body is 409. The store keeps, per route and key, only hashes: the record's
name is a hash of the key, its content a hash of (key, body digest) and the run id the first
request produced — never the key or the body. Requests with one key that arrive while the first
is still running wait for it instead of starting a second run. A request that failed records
nothing, so retrying it with the same key runs it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import datetime
from typing import Final

from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from assay.api.problems import Problem
from assay.canonical import content_hash
from assay.errors import NotFoundError
from assay.runs.records import now
from assay.store import EvidenceStore

_KEY: Final = re.compile(r"^[\x21-\x7e]{1,255}$")
_PREFIX: Final = "idempotency/"


class IdempotencyRecord(BaseModel):
    """What the store keeps for one key (write-once): hashes and the run id, nothing else."""

    request_sha256: str
    run_id: str
    at: datetime


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class Idempotency:
    """Idempotent execution of run requests, keyed by (route, Idempotency-Key)."""

    def __init__(self, store: EvidenceStore) -> None:
        self.store = store
        self._running: dict[str, tuple[str, asyncio.Future[str]]] = {}

    def _record(self, name: str) -> IdempotencyRecord | None:
        try:
            return IdempotencyRecord.model_validate_json(self.store.get(name))
        except NotFoundError:
            return None

    async def once(
        self, route: str, key: str, body: BaseModel, work: Callable[[], Awaitable[str]]
    ) -> tuple[str, bool]:
        """Run `work` (which returns a run id) once per key; returns (run id, replayed)."""
        if _KEY.fullmatch(key) is None:
            raise Problem(
                422,
                "Idempotency-Key: 1 to 255 visible ASCII characters",
                field="Idempotency-Key",
            )
        name = f"{_PREFIX}{route}/{_sha256(route + chr(0) + key)}.json"
        request = _sha256(f"{key}\0{content_hash(body.model_dump(mode='json'))}")
        conflict = Problem(
            409,
            "this Idempotency-Key was used with a different request body",
            kind="idempotency-conflict",
        )
        recorded = await run_in_threadpool(self._record, name)
        if recorded is not None:
            if recorded.request_sha256 != request:
                raise conflict
            return recorded.run_id, True
        if name in self._running:
            first_request, first = self._running[name]
            if first_request != request:
                raise conflict
            return await asyncio.shield(first), True
        first = asyncio.get_running_loop().create_future()
        self._running[name] = (request, first)
        try:
            run_id = await work()
            record = IdempotencyRecord(request_sha256=request, run_id=run_id, at=now())
            await run_in_threadpool(
                self.store.put_once_if_absent, name, record.model_dump_json().encode()
            )
            first.set_result(run_id)
            return run_id, False
        except BaseException as exc:
            if isinstance(exc, Exception):
                first.set_exception(exc)
                with suppress(Exception):
                    first.exception()  # waiters re-raise it; no "never retrieved" warning
            else:
                first.cancel()
            raise
        finally:
            del self._running[name]
