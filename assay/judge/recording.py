"""Returned calls put on record: their spend in groups, then each verdict (group commit).

A call's verdict may be kept only once its spend is on record (`assay.judge.spending.Spend`),
and the call holds its concurrency slot until both are written, so a kill -9 leaves at most the
window's calls paid but unrecorded. Writing one ledger record per call made every call wait for
two durable writes (each an fsync on a file store, a PUT on S3) and cost ≈ 0.65 ms of CPU each
on the writer threads, competing with the event loop for the GIL. Here the calls that return
while a ledger record is being written wait together and are written as **one** record for the
group (`calls` = its size); each then caches its verdict on its own writer thread and frees its
slot. Under load the groups grow by themselves, which is when fewer writes matter; a call
returning alone is written alone, as before.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

from assay.judge.port import PairVerdict, Verdict
from assay.judge.spending import Spend

VerdictT = TypeVar("VerdictT", Verdict, PairVerdict)


class Recorder(Generic[VerdictT]):
    """Puts a batch's returned calls on record as they arrive (see the module docstring).

    `arrived` is the judging's `on_verdict` hook: the awaitable it returns completes once the
    call's spend is in the ledger and `cache` has kept its verdict. A failed write is kept in
    `failures` (no further call should start) and completes the awaitable all the same.
    """

    def __init__(
        self,
        spend: Spend,
        cache: Callable[[int, VerdictT], None],
        ledger: concurrent.futures.Executor,
        writers: concurrent.futures.Executor,
    ) -> None:
        self._spend = spend
        self._cache: Callable[[int, VerdictT], None] = cache
        self._ledger = ledger
        self._writers = writers
        self._waiting: list[tuple[int, VerdictT, concurrent.futures.Future[None]]] = []
        self._lock = threading.Lock()
        self.failures: list[Exception] = []

    def arrived(self, position: int, verdict: VerdictT) -> Awaitable[None]:
        """Queue one returned call for the next ledger group; awaitable until it is on record.

        Shielded: a call abandoned when the judge circuit opens still records what came back."""
        on_record: concurrent.futures.Future[None] = concurrent.futures.Future()
        with self._lock:
            self._waiting.append((position, verdict, on_record))
        self._ledger.submit(self._write_group)
        return asyncio.shield(asyncio.wrap_future(on_record))

    def _write_group(self) -> None:
        """On the one ledger thread: everything waiting becomes one ledger record."""
        with self._lock:
            group, self._waiting = self._waiting, []
        if not group:  # an earlier submission took these calls into its group
            return
        try:
            self._spend.calls([verdict for _, verdict, _ in group])
        except Exception as exc:  # nothing of the group is cached: its spend is not on record
            self.failures.append(exc)
            for _, _, on_record in group:
                on_record.set_result(None)
            return
        for position, verdict, on_record in group:
            self._writers.submit(self._keep, position, verdict, on_record)

    def _keep(
        self, position: int, verdict: VerdictT, on_record: concurrent.futures.Future[None]
    ) -> None:
        try:
            self._cache(position, verdict)
        except Exception as exc:
            self.failures.append(exc)
        finally:
            on_record.set_result(None)


@contextmanager
def recording(
    spend: Spend, cache: Callable[[int, VerdictT], None], threads: int
) -> Iterator[Recorder[VerdictT]]:
    """A `Recorder` for one batch; on leaving, every write it was handed is done.

    One thread writes the ledger groups (one at a time: the next group gathers meanwhile), and
    `threads` writer threads cache the verdicts."""
    with (
        concurrent.futures.ThreadPoolExecutor(threads, "assay-verdict-cache") as writers,
        concurrent.futures.ThreadPoolExecutor(1, "assay-ledger") as ledger,
    ):  # the ledger pool shuts down first: its last group still hands verdicts to `writers`
        yield Recorder(spend, cache, ledger, writers)
