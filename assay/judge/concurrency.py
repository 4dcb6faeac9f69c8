"""How many judge calls are in flight: a run's bound per process, and async code run from sync.

`max_concurrency` (`ASSAY_JUDGE_CONCURRENCY`, a JudgeSettings block's field) bounds the calls a
run keeps in flight *in each process* it judges in, whatever runs them: the chunks a process
scores side by side (four threads in the launching process, or a Dask worker's threads) share
one set of slots (`run_slots`), so a run keeps the same number of calls in flight in-process
and on each Dask worker process; on W worker processes, up to W times as many reach the judge
(docs/scale.md). Each chunk runs its calls in its own event loop, so the slots are shared
across threads and event loops (`SharedSlots`), not an `asyncio.Semaphore` of one loop.

`auto` (the default) makes that bound a window that adapts to the endpoint (`AdaptiveSlots`), as
TCP's congestion window does: it starts at `AUTO_START_CONCURRENCY` (after its first reply,
below); while the window is what holds calls back, each answered request widens it by one until
the first sign of congestion (slow start: it doubles every round trip), and after that by one per
window of answers (additive increase); a 429 cuts it to ¾ and a 5xx or a timeout halves it
(multiplicative decrease, `KEPT_AFTER`), never below 1 nor above `concurrency_ceiling`. A
request sent before the last cut does not cut again: a burst of 429s from one overshoot cuts the
window once. The window only decides when the *next* call starts: a call in flight is never
withdrawn, so a cut takes effect as calls return.

Whatever its size, a window lets one call into flight until a reply comes back billed within its
bound (`max_tokens`, what its batch reserved), and goes back to one call at every reply billed
past it (`billed_past_bound`): a judge that bills more than its reservation has one call of the
run in flight per process while the run's reservation model is corrected from what it billed
(`assay.judge.spending`), so its overshoot past a block budget is one call's billed cost. An
`auto` window then grows from one again (slow start) on replies billed within their bound; a
fixed one opens to its number again. What an endpoint billed last is remembered by the process
(`BillingMemory`, one per endpoint and model): a run's window opens at once when that endpoint's
latest reply in this process, in any run, was billed within its bound — the one call alone
would have learned nothing new — and starts at one call otherwise. So a long-lived service pays
the lone first call once per judge, not once per run; a judge that starts billing past its bound
later costs at most one window of calls before the window is back at one, as within a run.

Each request reports to the window of the batch it belongs to (`watched`, around every request
the adapter sends): the batch names its window in a context variable (`reporting_to`), which
every call task it starts inherits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import time
from collections import Counter, deque
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, TypeVar

from assay.judge.config import AUTO, AUTO_START_CONCURRENCY, Concurrency
from assay.judge.endpoint import congestion
from assay.process_state import remembered

logger = logging.getLogger(__name__)

T = TypeVar("T")
SLOTS_KEPT: Final = 256
"""Runs whose slots this process remembers (the oldest is forgotten first)."""
KEPT_AFTER: Final = {"429": 0.75, "5xx": 0.5, "timeout": 0.5}
"""What an `auto` window keeps of itself after each kind of congestion."""


class BillingMemory:
    """Whether an endpoint's latest reply in this process was billed within its bound.

    One per endpoint and model (`blocks.judge_settings` hands them out; the adapter reports every
    reply to it through `watched`): a window made for a judge whose memory says `within` opens
    at once instead of letting one call in first (see the module docstring)."""

    def __init__(self) -> None:
        self.within = False
        """True when the latest reply was billed within its `max_tokens`; False before any."""


class SharedSlots:
    """At most `limit` holders at once across every thread and event loop of this process;
    waiters are served first come, first served. A fixed window: requests' outcomes are only
    counted (`congestion`). `trusted`: the judge's latest reply in this process was billed within
    its bound (`BillingMemory`), so the window opens at once."""

    def __init__(self, limit: int, *, trusted: bool = False) -> None:
        if limit < 1:
            raise ValueError(f"max_concurrency must be at least 1, not {limit}")
        self.size = limit
        """The calls let into flight once a reply was billed within its bound."""
        self.limit = limit if trusted else 1
        """The calls let into flight now: one until then (see the module docstring)."""
        self.peak = 0
        """The most slots held at once."""
        self.congestion: Counter[str] = Counter()
        """Requests that met congestion, by kind (`429`, `5xx`, `timeout`)."""
        self._held = 0
        self._waiting: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()
        self._lock = threading.Lock()
        self._trusted = trusted
        self._distrusted_at = -math.inf

    @property
    def most(self) -> int:
        """The most calls this window ever lets into flight at once."""
        return self.size

    def answered(self, sent_at: float) -> None:
        """A request sent at `sent_at` (`time.monotonic`) was answered within its bound."""
        with self._lock:
            self._trust(sent_at)

    def billed_past_bound(self) -> None:
        """A reply billed more output tokens than its call was priced at (`max_tokens`): one
        call in flight until a reply to a request sent from now on is billed within it."""
        with self._lock:
            self._distrust()
        logger.warning("judge billed past max_tokens: one call in flight until it bills within")

    def _trust(self, sent_at: float) -> bool:
        """Under the lock: open the window to `size` on a reply within its bound to a request
        sent since the last reply past it. False when it was open already."""
        if self._trusted:
            return False
        if sent_at >= self._distrusted_at:
            self._trusted = True
            self._resize(self.size)
        return True

    def _distrust(self) -> None:
        """Under the lock: back to one call in flight."""
        self._trusted = False
        self._distrusted_at = time.monotonic()
        self._resize(1)

    def congested(self, sent_at: float, kind: str) -> None:
        """A request sent at `sent_at` met congestion of `kind` (`429`, `5xx`, `timeout`)."""
        with self._lock:
            self.congestion[kind] += 1

    async def acquire(self) -> None:
        """Wait for a slot (a cancelled wait takes none)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._held < self.limit and not self._waiting:
                self._take()
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
        """Give a slot back: to the longest waiter while the window has room for it, else to
        the pool (after a cut, until fewer than `limit` are held)."""
        with self._lock:
            if self._held > self.limit or not self._hand_on():
                self._held -= 1

    def _take(self) -> None:
        self._held += 1
        self.peak = max(self.peak, self._held)

    def _hand_on(self) -> bool:
        """Hand a held slot to the longest waiter (under the lock); False when none waits."""
        while self._waiting:
            loop, waiter = self._waiting.popleft()
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._hand_over, waiter)
                return True
        return False

    def _resize(self, limit: int) -> None:
        """Let `limit` calls into flight from now on (under the lock), waking waiters if wider."""
        self.limit = limit
        while self._held < self.limit and self._waiting:
            self._take()
            if not self._hand_on():
                self._held -= 1

    def _hand_over(self, waiter: asyncio.Future[None]) -> None:
        if waiter.done():  # its wait was cancelled meanwhile: the next waiter gets the slot
            self.release()
        else:
            waiter.set_result(None)


class AdaptiveSlots(SharedSlots):
    """A window of calls in flight that adapts to the endpoint (AIMD: the module docstring)."""

    def __init__(
        self, ceiling: int, start: int = AUTO_START_CONCURRENCY, *, trusted: bool = False
    ) -> None:
        super().__init__(max(1, min(start, ceiling)), trusted=trusted)
        self.ceiling = ceiling
        self._slow_start = True
        self._answers = 0
        self._cut_at = -math.inf

    @property
    def most(self) -> int:
        return self.ceiling

    def answered(self, sent_at: float) -> None:
        with self._lock:
            if self._trust(sent_at):
                return  # the window was holding to one call: it opens to `size`, no more
            if sent_at < self._cut_at or self._held < self.limit or self.limit >= self.ceiling:
                return  # sent before the last cut, or the window was not what held calls back
            self._answers += 1
            if self._slow_start or self._answers >= self.limit:
                self._answers = 0
                self._resize(self.limit + 1)

    def billed_past_bound(self) -> None:
        """The calls in flight are no longer each within their batch's reservation (a judge
        billing past `max_tokens` costs what it reports): back to one call in flight, and a slow
        start from one again once a reply is billed within its bound."""
        with self._lock:
            self._distrust()
            self.size, self._slow_start, self._answers = 1, True, 0
        logger.warning("judge billed past max_tokens: calls in flight back to 1 (slow start)")

    def congested(self, sent_at: float, kind: str) -> None:
        with self._lock:
            self.congestion[kind] += 1
            if sent_at < self._cut_at:
                return  # the last cut already answered the window this request was sent in
            before = self.limit if self._trusted else self.size
            self._slow_start, self._answers = False, 0
            self._cut_at = time.monotonic()
            kept = max(1, int(before * KEPT_AFTER[kind]))
            if self._trusted:
                self._resize(kept)
            else:  # still one call in flight: it opens to the narrower window
                self.size = kept
        logger.info("judge calls in flight: %d -> %d after a %s", before, kept, kind)


_SLOTS: dict[tuple[str, Concurrency, int], SharedSlots] = {}
_SLOTS_LOCK = threading.Lock()
remembered(__name__, "_SLOTS", _SLOTS.clear, _SLOTS_LOCK)


def run_slots(
    run_id: str, concurrency: Concurrency, ceiling: int, billing: BillingMemory | None = None
) -> SharedSlots:
    """The window of a run's judge calls in this process, shared by all its chunks: fixed at
    `concurrency` calls, or adapting up to `ceiling` when `concurrency` is `auto`. Made open at
    once when `billing` says the judge's latest reply was billed within its bound."""
    key = (run_id, concurrency, ceiling)
    with _SLOTS_LOCK:
        found = _SLOTS.get(key)
        if found is None:
            if len(_SLOTS) >= SLOTS_KEPT:
                _SLOTS.pop(next(iter(_SLOTS)))
            trusted = billing is not None and billing.within
            window = (
                AdaptiveSlots(ceiling, trusted=trusted)
                if concurrency == AUTO
                else SharedSlots(int(concurrency), trusted=trusted)
            )
            found = _SLOTS[key] = window
        return found


_REPORTING_TO: ContextVar[SharedSlots | None] = ContextVar("judge_window", default=None)


@contextmanager
def reporting_to(window: SharedSlots) -> Iterator[None]:
    """Requests sent by the tasks started in this block report their outcome to `window`."""
    token = _REPORTING_TO.set(window)
    try:
        yield
    finally:
        _REPORTING_TO.reset(token)


class WatchedReply:
    """What a watched request's reply billed, as the adapter reads it."""

    def __init__(self, max_tokens: int | None) -> None:
        self.max_tokens = max_tokens
        self.past_bound = False

    def billed(self, output_tokens: int) -> None:
        self.past_bound = self.max_tokens is not None and output_tokens > self.max_tokens


@contextmanager
def watched(max_tokens: int | None, billing: BillingMemory | None = None) -> Iterator[WatchedReply]:
    """Report one request's outcome to its batch's window, if any: congestion, a reply billed
    past `max_tokens`, or an answer; and whether its reply was billed within its bound to the
    endpoint's `billing` memory."""
    window = _REPORTING_TO.get()
    sent_at = time.monotonic()
    reply = WatchedReply(max_tokens)
    try:
        yield reply
    except Exception as exc:
        kind = congestion(exc)
        if window is not None and kind is not None:
            window.congested(sent_at, kind)
        raise
    if billing is not None:
        billing.within = not reply.past_bound
    if window is None:
        return
    if reply.past_bound:
        window.billed_past_bound()
    else:
        window.answered(sent_at)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
