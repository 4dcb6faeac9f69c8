"""How many judge calls are in flight: a run's bound per process, and async code run from sync.

`max_concurrency` (`ASSAY_JUDGE_CONCURRENCY`, a JudgeSettings block's field) bounds the calls a
run keeps in flight *in each process* it judges in, whatever runs them: the chunks a process
scores side by side (four threads in the launching process, or a Dask worker's threads) share
one set of slots (`run_slots`), so a run keeps the same number of calls in flight in-process
and on each Dask worker process; on W worker processes, up to W times as many reach the judge
(docs/scale.md). Each chunk runs its calls in its own event loop, so the slots are shared
across threads and event loops (`SharedSlots`), not an `asyncio.Semaphore` of one loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import deque
from collections.abc import Coroutine
from typing import Any, Final, TypeVar

from assay.process_state import remembered

T = TypeVar("T")
SLOTS_KEPT: Final = 256
"""Runs whose slots this process remembers (the oldest is forgotten first)."""


class SharedSlots:
    """At most `limit` holders at once across every thread and event loop of this process;
    waiters are served first come, first served."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {limit}")
        self.limit = limit
        self._held = 0
        self._waiting: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._lock = threading.Lock()

    async def acquire(self) -> None:
        """Wait for a slot (a cancelled wait takes none)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._held < self.limit and not self._waiting:
                self._held += 1
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiting.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                if (loop, waiter) in self._waiting:  # not handed a slot yet
                    self._waiting.remove((loop, waiter))
                    raise
            if waiter.done() and not waiter.cancelled():  # handed one as it was cancelled
                self.release()
            raise  # else the hand-over finds the wait cancelled and passes the slot on

    def release(self) -> None:
        """Give a slot back: to the longest waiter, else to the pool."""
        with self._lock:
            while self._waiting:
                loop, waiter = self._waiting.popleft()
                if not loop.is_closed():
                    loop.call_soon_threadsafe(self._hand_over, waiter)
                    return
            self._held -= 1

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():  # its wait was cancelled meanwhile: the next waiter gets the slot
            self.release()
        else:
            waiter.set_result(None)


_SLOTS: dict[tuple[str, int], SharedSlots] = {}
_SLOTS_LOCK = threading.Lock()
remembered(__name__, "_SLOTS", _SLOTS.clear, _SLOTS_LOCK)


def run_slots(run_id: str, limit: int) -> SharedSlots:
    """The slots of a run's judge calls in this process, shared by all its chunks."""
    with _SLOTS_LOCK:
        found = _SLOTS.get((run_id, limit))
        if found is None:
            if len(_SLOTS) >= SLOTS_KEPT:
                _SLOTS.pop(next(iter(_SLOTS)))
            found = _SLOTS[run_id, limit] = SharedSlots(limit)
        return found


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
