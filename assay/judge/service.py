"""The judging service: every judged verdict in Assay goes through here, and only here.

Suite checks (`assay.runs.judging`), pairwise comparisons (`assay.pairwise`), calibration
(`assay.calibration.calibrate`) and the outcome score's judged dimensions (`assay.outcome`) build
their requests and cache keys, then hand them to `judge_requests` (one verdict per output) or
`judge_pair_requests` (one verdict per presented pair). For every batch, in this order:

1. the verdict cache answers what it can — a hit costs nothing (`fresh` bypasses it);
2. the FinOps preflight prices what is left and checks the applicable budgets: `blocked`,
   `throttled` or `refused` stops the spending and every pending verdict is skipped
   (`budget_blocked`), never passed;
   Before reading, the batch *reserves* its projected spend (`assay.finops.reservations`) so
   that concurrent batches — other runs, other chunks, other workers — count it too; the
   reservation is released once the actual spend is in the ledger;
3. the port is called with bounded concurrency, each request capped at `max_output_tokens`
   (what the preflight priced), so a long-winded judge cannot spend past the projection;
4. as calls return, their tokens are priced and appended to the cost ledger (a small group
   per record), then their verdicts cached (write-once): nothing paid is lost by a kill, a
   retry or a resume with another chunk layout, and nothing is counted twice. When the store
   cannot take the spend or the verdicts, no further call is started;
5. after every paid call, the batch's actual spend is checked against each `block` budget
   (`assay.finops.budget.spent_past`): a judge that bills past `max_tokens` is recorded as
   it reported (the ledger keeps the true cost, and the call is counted in `over_bound`), and
   once a limit is passed no further call starts — the rest are skipped (`budget_blocked`)
   and the batch's decision becomes `blocked`.

**The judge circuit** (a suite run's checks, `judge_repeated`). A judge that never answers
costs each call its whole deadline (retries included, about a minute by default): a 2,000-check
run would wait hours before failing closed. So each run (its `run_id`: all its chunks, batches
and repeats) has one circuit in this process. After `BREAKER_FAILURES` consecutive calls that
came back `judge unavailable: …` — a timeout, a connection error, a 5xx or any other error that
survived the adapter's retries — the circuit opens: no further call of that run starts, and
every verdict not yet asked is skipped as `judge unavailable: CircuitOpen` (never a pass; the
check reads `unavailable: judge circuit open …`, so the run fails its coverage and its summary
says why). Calls in flight are abandoned then, as skipped (a judge that failed that many
calls in a row would only make them wait out their deadline; a reply still on its way is not
recorded, as after a kill). Any reply (a verdict, or a
malformed one) starts the count again. An open circuit closes after `BREAKER_OPEN_SECONDS`, so
a later resume in a long-lived process (`assay serve`) tries the judge again. The circuit is
per process: chunks on threads share it, each Dask worker process has its own. Comparisons,
calibration and the outcome score judge bounded batches and have none.

With no judge configured, every verdict is skipped with the reason (fail closed).

One cache layout (`cache_key`): `judge-cache/<kind>/<xx>/<digest>.json`, where the digest is a
keyed hash (the store's HMAC secret) of the kind, the judge pin, what the judge sees and
`CACHE_LAYOUT`. Keyed, because the content includes live user text that a plain hash of a short
answer could be guessed back from; versioned, so entries written under an older layout are never
found again (a miss costs a call; a misread would be a wrong verdict).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Generic, Literal, TypeVar

from assay.canonical import canonical_json
from assay.errors import AssayError
from assay.finops.budget import Budget, Decision, Standing, assess, refused, spent_past
from assay.finops.ledger import CostRecord, record_cost, scope_matches
from assay.finops.pricing import Prices, estimate_tokens, price
from assay.finops.reservations import Reservation, release, reserve
from assay.hashing import OutputHasher
from assay.judge.port import (
    BUDGET_BLOCKED,
    UNAVAILABLE_PREFIX,
    Judge,
    JudgePin,
    JudgeRequest,
    PairJudge,
    PairRequest,
    PairVerdict,
    Verdict,
    judge_all,
    judge_pairs_all,
    judge_unavailable,
)
from assay.judge.redaction import NO_REDACTION, RedactionSettings
from assay.store import EvidenceStore

logger = logging.getLogger(__name__)
T = TypeVar("T")
RequestT = TypeVar("RequestT", JudgeRequest, PairRequest)
VerdictT = TypeVar("VerdictT", Verdict, PairVerdict)

CACHE_PREFIX: Final = "judge-cache/"
CACHE_LAYOUT: Final = 2
"""Bumped whenever what a cache key covers changes: older entries then become misses."""
CacheKind = Literal["check", "pairwise", "calibration", "outcome"]
FREE: Final = Prices(input_per_million=0, output_per_million=0)
DEFAULT_MAX_OUTPUT_TOKENS: Final = 400
"""Tokens a judge may answer with (reasoning + verdict JSON), and what the preflight prices."""
CONTENTION_RETRIES: Final = 3
CONTENTION_PAUSE_SECONDS: Final = 0.2
BREAKER_FAILURES: Final = 4
"""Consecutive failed judge calls (each after its own retries) that open a run's judge circuit: the
default calls in flight (`ASSAY_JUDGE_CONCURRENCY`, 4), so a judge that never answers costs one call
deadline, not two."""
BREAKER_OPEN_SECONDS: Final = 600.0
"""How long an open judge circuit stays open before the judge is tried again."""
CIRCUITS_KEPT: Final = 256
"""Runs whose circuit this process remembers (the oldest is forgotten first)."""
CIRCUIT_WATCH_SECONDS: Final = 0.25
"""How often a batch in flight looks whether its run's judge circuit opened."""


class JudgeUnsupportedError(AssayError):
    """The configured judge cannot give the kind of verdict asked for (retrying does not help)."""


class CircuitOpen(Exception):
    """Stops a run's judge calls: its judge circuit is open (see the module docstring)."""


CIRCUIT_OPEN: Final = judge_unavailable(CircuitOpen)
"""The skip reason of a verdict not asked because the run's judge circuit was open."""
CIRCUIT_OPEN_WHY: Final = (
    f"judge circuit open after {BREAKER_FAILURES} consecutive failed judge calls; not sent"
)
"""What a suite check skipped for `CIRCUIT_OPEN` says (`unavailable: …`), and the run's summary."""


@dataclass
class _Circuit:
    """One run's judge circuit in this process (see the module docstring)."""

    run_id: str
    opens_after: int | None = BREAKER_FAILURES
    """Consecutive failed calls that open it; None: it never opens."""
    failures: int = 0
    opened_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def is_open(self) -> bool:
        with self._lock:
            if self.opened_at is not None and (
                time.monotonic() - self.opened_at >= BREAKER_OPEN_SECONDS
            ):
                self.opened_at, self.failures = None, 0
            return self.opened_at is not None

    def answered(self, reason: str) -> None:
        """Count one call that returned with `reason`: `judge unavailable: …` is a failure,
        anything else (the judge replied) starts the count again."""
        with self._lock:
            failed = reason.startswith(UNAVAILABLE_PREFIX)
            self.failures = self.failures + 1 if failed else 0
            opens = (
                self.opens_after is not None
                and self.failures >= self.opens_after
                and self.opened_at is None
            )
            if opens:
                self.opened_at = time.monotonic()
        if opens:
            logger.warning(
                "judge circuit open for run %s after %d consecutive failed calls: its judged "
                "checks not yet asked are skipped (%s), never passed",
                self.run_id,
                self.failures,
                CIRCUIT_OPEN,
            )


_CIRCUITS: dict[str, _Circuit] = {}
_CIRCUITS_LOCK = threading.Lock()


def _unbroken(run_id: str) -> _Circuit:
    """A circuit that never opens: judgings other than a run's checks."""
    return _Circuit(run_id, opens_after=None)


def _circuit(run_id: str) -> _Circuit:
    """The judge circuit of a run's checks in this process, shared by all its chunks."""
    with _CIRCUITS_LOCK:
        found = _CIRCUITS.get(run_id)
        if found is None:
            if len(_CIRCUITS) >= CIRCUITS_KEPT:
                _CIRCUITS.pop(next(iter(_CIRCUITS)))
            found = _CIRCUITS[run_id] = _Circuit(run_id)
        return found


@dataclass
class JudgeSetup:
    """How this run judges: which judge (or why none), concurrency, prices, budgets."""

    make_judge: Callable[[], Judge] | None
    """Builds the judge inside the batch's event loop; None when no judge is configured."""
    skip_reason: str
    """Why verdicts are skipped when `make_judge` is None (`no judge configured`, …)."""
    model: str | None = None
    prompt_version: str | None = None
    max_concurrency: int = 4
    prices: Prices = field(default_factory=lambda: FREE)
    budgets: list[Budget] | None = field(default_factory=list)
    """Applicable budgets; None when they could not be read (spending is then refused)."""
    fresh: bool = False
    redaction: RedactionSettings = NO_REDACTION
    """What the judge redacts before each call (already part of `prompt_version`)."""
    repeats: int = 1
    """Verdicts asked per suite check (`--judge-repeats`); the check takes the majority."""
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    """Priced by the preflight for every call, and sent as `max_tokens`: the projection bounds
    the spend however long the judge would have answered."""

    @property
    def pin(self) -> JudgePin:
        """The judge pin verdicts are cached and recorded under."""
        return JudgePin(model=self.model, prompt_version=self.prompt_version)


NO_JUDGE_NEEDED = JudgeSetup(None, "no judge configured")
"""For suites without `llm_judge` checks: nothing to configure, nothing to read."""


def cache_key(
    hasher: OutputHasher, kind: CacheKind, pin: JudgePin, content: Mapping[str, Any]
) -> str:
    """The verdict-cache key of one judged question (see the module docstring).

    Args:
        hasher: The store's keyed hash (`OutputHasher(store_secret(store))`).
        kind: Which caller's verdicts these are; kinds never share an entry.
        pin: The judge (model pin, prompt version) the verdict comes from.
        content: Everything the judge sees that decides the verdict (texts, rubric, threshold).
    """
    material = {"layout": CACHE_LAYOUT, "kind": kind, "judge": pin.model_dump(), **content}
    digest = hasher(canonical_json(material)).removeprefix("hmac-sha256:")
    return f"{CACHE_PREFIX}{kind}/{digest[:2]}/{digest}.json"


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


@dataclass
class Judged(Generic[VerdictT]):
    """What judging a batch of requests produced: one verdict per request, in order (no text)."""

    verdicts: list[VerdictT]
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    decision: Decision | None = None
    over_bound: int = 0
    """Calls whose reported output tokens exceeded the `max_tokens` they were sent with."""


@dataclass(frozen=True)
class _Way(Generic[RequestT, VerdictT]):
    """How one kind of verdict is asked for, read back, skipped and kept."""

    verdict: type[VerdictT]
    ask: Callable[
        [
            Judge,
            Sequence[RequestT],
            int,
            Callable[[int, VerdictT], Awaitable[None] | None],
            Callable[[], BaseException | None],
        ],
        Awaitable[list[VerdictT]],
    ]
    length: Callable[[RequestT], int]
    """Characters the judge reads for one request (for the spend estimate)."""
    skipped: Callable[[str, JudgePin | None], VerdictT]
    """A skipped verdict with its reason (and the pin, when a judge was involved)."""
    cacheable: Callable[[VerdictT, JudgePin], bool]


async def _ask_verdicts(
    judge: Judge,
    requests: Sequence[JudgeRequest],
    limit: int,
    on_verdict: Callable[[int, Verdict], Awaitable[None] | None],
    stop: Callable[[], BaseException | None],
) -> list[Verdict]:
    return await judge_all(judge, requests, limit, on_verdict, stop)


async def _ask_pairs(
    judge: Judge,
    requests: Sequence[PairRequest],
    limit: int,
    on_verdict: Callable[[int, PairVerdict], Awaitable[None] | None],
    stop: Callable[[], BaseException | None],
) -> list[PairVerdict]:
    if not isinstance(judge, PairJudge):
        raise JudgeUnsupportedError(f"the configured judge ({type(judge).__name__}) cannot compare")
    return await judge_pairs_all(judge, requests, limit, on_verdict, stop)


_VERDICTS: _Way[JudgeRequest, Verdict] = _Way(
    verdict=Verdict,
    ask=_ask_verdicts,
    length=lambda r: len(r.input) + len(r.expected or "") + len(r.rubric) + len(r.output),
    skipped=lambda reason, _pin: Verdict.skipped(reason),
    cacheable=lambda verdict, _pin: verdict.status != "skipped",
)
_PAIRS: _Way[PairRequest, PairVerdict] = _Way(
    verdict=PairVerdict,
    ask=_ask_pairs,
    length=lambda r: (
        len(r.input) + len(r.expected or "") + len(r.rubric) + len(r.first) + len(r.second)
    ),
    skipped=lambda reason, pin: PairVerdict.skipped(
        reason,
        model=pin.model if pin else None,
        prompt_version=pin.prompt_version if pin else None,
    ),
    # A verdict stamped with another pin (a judge told to use another prompt) is never kept.
    cacheable=lambda verdict, pin: (
        verdict.status == "judged"
        and verdict.model == pin.model
        and verdict.prompt_version == pin.prompt_version
    ),
)


@dataclass(frozen=True)
class Spender:
    """Whose spend a batch is: what budgets scope and the cost ledger records."""

    run_id: str
    """Names the cost records (with the chunk number)."""
    suite: str
    """The suite judged (empty outside a suite)."""
    subject: str
    """The subject judged (`KIND:ID[@VARIANT]`)."""
    at: datetime
    """When the spend happens: dates the ledger and picks budget periods."""


def judge_requests(
    store: EvidenceStore,
    setup: JudgeSetup,
    requests: Sequence[tuple[str, JudgeRequest]],
    *,
    run_id: str,
    chunk: int,
    suite: str,
    subject: str,
    now: datetime | None = None,
) -> Judged[Verdict]:
    """Judge outputs through the cache, the preflight, the judge and the ledger.

    Args:
        store: The evidence store (verdict cache, cost ledger, budget spend).
        setup: How to judge; with no judge, every verdict is skipped with `setup.skip_reason`.
        requests: `(cache key, request)` pairs; the key comes from `cache_key`.
        run_id: Names the batch's cost record (with `chunk`).
        chunk: Numbers the batch within the run: one cost record per run and chunk.
        suite: The suite judged, for budget scopes and the ledger (empty outside a suite).
        subject: The subject judged (`KIND:ID[@VARIANT]`), for budget scopes and the ledger.
        now: When the spend happens (dates the ledger and picks budget periods); default now.

    Returns:
        One verdict per request, in order, with the calls made, cache hits, cost and the
        preflight decision (None when nothing needed judging).
    """
    spender = Spender(run_id, suite, subject, now or datetime.now(UTC))
    return _judge(store, setup, requests, _VERDICTS, spender, _unbroken(run_id), first_chunk=chunk)


def repeat_key(key: str, repeat: int) -> str:
    """The cache key of repeat `repeat` (0-based) of a question: repeat 0 is the question's own
    key, so a run with repeats reuses what a single-verdict run paid for, and each further
    repeat has its own entry (a re-run spends nothing)."""
    return key if repeat == 0 else f"{key.removesuffix('.json')}.r{repeat}.json"


def judge_repeated(
    store: EvidenceStore,
    setup: JudgeSetup,
    requests: Sequence[tuple[str, JudgeRequest]],
    spender: Spender,
    chunk: int,
) -> tuple[Judged[Verdict], list[list[Verdict]]]:
    """Judge each request `setup.repeats` times, as one batch (see `judge_requests`).

    Every repeat is its own request under its own cache key (`repeat_key`), so the preflight
    prices all K of them before anything is spent, and a re-run finds every repeat cached.
    The run's judge circuit (see the module docstring) stops its calls once the judge has
    failed `BREAKER_FAILURES` calls in a row.

    Returns:
        The batch (calls, cache hits, cost, decision) and, per request in order, its K verdicts.
    """
    k = setup.repeats
    if k < 1:
        raise ValueError(f"repeats must be at least 1, not {k}")
    expanded = [(repeat_key(key, r), request) for key, request in requests for r in range(k)]
    circuit = _circuit(spender.run_id)
    batch = _judge(store, setup, expanded, _VERDICTS, spender, circuit, first_chunk=chunk)
    return batch, [batch.verdicts[i * k : (i + 1) * k] for i in range(len(requests))]


def judge_pair_requests(
    store: EvidenceStore,
    setup: JudgeSetup,
    requests: Sequence[tuple[str, PairRequest]],
    spender: Spender,
    *,
    batch_size: int,
    on_decision: Callable[[Decision], None] | None = None,
) -> Judged[PairVerdict]:
    """Judge presented pairs like `judge_requests`, in batches of `batch_size` calls.

    Each batch is cached and priced into its own ledger record (chunk = batch number) before
    the next starts, so an interrupted comparison keeps, and has recorded, what it paid for.
    `on_decision` sees the preflight's decision before any call is made.

    Raises:
        JudgeUnsupportedError: The configured judge cannot compare pairs.
    """
    return _judge(
        store,
        setup,
        requests,
        _PAIRS,
        spender,
        _unbroken(spender.run_id),
        batch_size=batch_size,
        on_decision=on_decision,
    )


def _judge(
    store: EvidenceStore,
    setup: JudgeSetup,
    requests: Sequence[tuple[str, RequestT]],
    way: _Way[RequestT, VerdictT],
    spender: Spender,
    circuit: _Circuit,
    *,
    first_chunk: int = 0,
    batch_size: int | None = None,
    on_decision: Callable[[Decision], None] | None = None,
) -> Judged[VerdictT]:
    if setup.make_judge is None:
        return Judged([way.skipped(setup.skip_reason, None)] * len(requests))
    verdicts: list[VerdictT | None] = [None] * len(requests)
    judged: Judged[VerdictT] = Judged(verdicts=[])
    pending: list[int] = []
    for index, (key, _) in enumerate(requests):
        if not setup.fresh and store.exists(key):
            verdicts[index] = way.verdict.model_validate_json(store.get(key))
            judged.cache_hits += 1
        else:
            pending.append(index)
    if pending and circuit.is_open():  # nothing is priced, reserved or asked
        not_sent = way.skipped(CIRCUIT_OPEN, setup.pin)
        for index in pending:
            verdicts[index] = not_sent
        pending = []
    if pending:
        projected = price(
            setup.prices,
            *estimate_tokens(
                [way.length(requests[i][1]) for i in pending],
                output_tokens=setup.max_output_tokens,
            ),
        )
        reservation, judged.decision, standings = _reserve(
            store, setup, spender, first_chunk, projected
        )
        if on_decision is not None:
            on_decision(judged.decision)
        blocked = way.skipped(BUDGET_BLOCKED, setup.pin)
        if judged.decision.allowed:
            guard = _Guard(judged.decision, standings)
            try:
                for number, batch in enumerate(_batches(pending, batch_size or len(pending))):
                    if guard.stopped is not None:
                        for index in batch:
                            verdicts[index] = blocked
                        continue
                    spend = _Spend(store, setup, spender, first_chunk + number, reservation, guard)
                    answers = _ask(store, setup, way, [requests[i] for i in batch], spend, circuit)
                    for index, verdict in zip(batch, answers, strict=True):
                        verdicts[index] = verdict
                    judged.calls += len(spend.parts)
                    judged.cost_usd += spend.cost_usd
                    judged.over_bound += spend.over_bound
            finally:
                if reservation is not None:
                    with suppress(Exception):  # unreleased, it expires (reservations.TTL_ENV)
                        release(store, reservation)
            judged.decision = guard.stopped or judged.decision
        else:
            for index in pending:
                verdicts[index] = blocked
    judged.verdicts = [verdict for verdict in verdicts if verdict is not None]
    return judged


def _reserve(
    store: EvidenceStore, setup: JudgeSetup, spender: Spender, chunk: int, projected: float
) -> tuple[Reservation | None, Decision, tuple[Standing, ...]]:
    """Reserve the projected spend, then run the preflight counting everyone else's reservations.

    Reserving *before* reading means two concurrent batches always see at least one of each
    other's reservations, so together they cannot pass a limit that each alone fits under. When
    only other live reservations stop a batch (`Decision.contended`), it withdraws and tries
    again after a random pause, so a race ends with one winner rather than two losers.
    Returns the reservation (when one is held), the decision and the block budgets' standings.
    """

    def check(reservation: Reservation | None) -> tuple[Decision, tuple[Standing, ...]]:
        return assess(
            store,
            setup.budgets,
            projected,
            spender.suite,
            spender.subject,
            spender.at,
            reservation=reservation,
        )

    if projected <= 0 or not any(
        scope_matches(budget.scope, spender.suite, spender.subject)
        for budget in setup.budgets or []
    ):
        return None, *check(None)  # nothing to hold: no spend, no budget, or budgets unreadable
    for attempt in range(CONTENTION_RETRIES + 1):
        try:
            reservation = reserve(
                store,
                run_id=spender.run_id,
                chunk=chunk,
                suite=spender.suite,
                subject=spender.subject,
                amount_usd=projected,
                now=spender.at,
            )
        except Exception as exc:  # a reservation that cannot be written refuses (fail closed)
            why = f"budget reservation not written ({type(exc).__name__})"
            return None, refused(projected, why), ()
        decision, standings = check(reservation)
        if decision.allowed:
            return reservation, decision, standings
        release(store, reservation)
        if not decision.contended or attempt == CONTENTION_RETRIES:
            return None, decision, ()
        time.sleep(random.uniform(0.5, 1.5) * CONTENTION_PAUSE_SECONDS * 2**attempt)
    raise AssertionError("unreachable")  # pragma: no cover - the loop always returns


def _batches(items: list[int], size: int) -> Iterator[list[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass
class _Guard:
    """A judging's actual spend against its block budgets, across its batches (step 5)."""

    decision: Decision
    """The preflight's decision that let it spend."""
    standings: tuple[Standing, ...]
    """Where each block budget stood at the preflight."""
    actual_usd: float = 0.0
    stopped: Decision | None = None
    """The `blocked` decision, once the actual spend passed a block budget's limit."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def paid(self, cost_usd: float) -> None:
        with self._lock:
            self.actual_usd += cost_usd
            if self.stopped is None:
                self.stopped = spent_past(self.decision, self.standings, self.actual_usd)


class _BudgetSpent(Exception):
    """Stops a batch's calls: its actual spend passed a block budget (see `_Guard`)."""


@dataclass
class _Spend:
    """Records one batch's spend in the ledger as its calls return (see `assay.finops.ledger`)."""

    store: EvidenceStore
    setup: JudgeSetup
    spender: Spender
    chunk: int
    reservation: Reservation | None
    guard: _Guard
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    over_bound: int = 0
    parts: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _record(self, calls: int, used_in: int, used_out: int, **which: Any) -> float:
        cost = price(self.setup.prices, used_in, used_out)
        record_cost(
            self.store,
            CostRecord(
                run_id=self.spender.run_id,
                chunk=self.chunk,
                suite=self.spender.suite,
                subject=self.spender.subject,
                model=self.setup.model or "",
                prompt_version=self.setup.prompt_version or "",
                calls=calls,
                input_tokens=used_in,
                output_tokens=used_out,
                cost_usd=cost,
                at=self.spender.at,
                reservation=self.reservation.id if self.reservation else None,
                **which,
            ),
        )
        return cost

    def call(self, verdict: Verdict | PairVerdict) -> None:
        """Append one returned call's spend to the ledger (write-once, its own record)."""
        part = uuid.uuid4().hex
        cost = self._record(1, verdict.input_tokens, verdict.output_tokens, part=part)
        with self._lock:
            self.parts.append(part)
            self.cost_usd += cost
            self.input_tokens += verdict.input_tokens
            self.output_tokens += verdict.output_tokens
            self.over_bound += verdict.output_tokens > self.setup.max_output_tokens
        self.guard.paid(cost)

    def close(self) -> None:
        """Write the batch's summary, which stands for its calls' records from now on."""
        if self.parts:
            covers = sorted(self.parts)
            self._record(
                len(covers),
                self.input_tokens,
                self.output_tokens,
                batch=uuid.uuid4().hex,
                covers=covers,
            )


def _ask(
    store: EvidenceStore,
    setup: JudgeSetup,
    way: _Way[RequestT, VerdictT],
    batch: Sequence[tuple[str, RequestT]],
    spend: _Spend,
    circuit: _Circuit,
) -> list[VerdictT]:
    """Call the judge on one batch; record the spend and cache the verdicts as they arrive.

    Each returned call goes to a writer thread, which appends its spend to the ledger and
    *then* caches its verdict: a verdict is never kept (so never re-judged for free) without its
    spend on record. The call's concurrency slot is held until then, so a kill -9 can leave at
    most `max_concurrency` calls paid but unrecorded; the writes overlap the other calls in
    flight, so neither their latency (fsync, an S3 round trip) nor their I/O blocks the event
    loop. When a write fails — the store cannot take the spend or the evidence — no further
    call is started; nor when the spend passes a block budget (`_Guard`), and then the calls
    not started are skipped (`budget_blocked`); nor once the run's judge circuit is open, and
    then they, and the calls still in flight (abandoned), are skipped as `CIRCUIT_OPEN`.
    """
    pin = setup.pin
    capped = [
        request.model_copy(update={"max_output_tokens": setup.max_output_tokens})
        for _, request in batch
    ]
    failure: list[Exception] = []
    kept: dict[int, VerdictT] = {}

    def keep(position: int, verdict: VerdictT) -> None:
        kept[position] = verdict
        circuit.answered(verdict.reason)
        try:
            spend.call(verdict)
            if way.cacheable(verdict, pin):
                store.put_once_if_absent(batch[position][0], verdict.model_dump_json().encode())
        except Exception as exc:  # no further call starts (see `stop`); raised below
            failure.append(exc)

    with concurrent.futures.ThreadPoolExecutor(setup.max_concurrency) as writers:

        def arrived(position: int, verdict: VerdictT) -> Awaitable[None]:
            # Awaited while the call holds its concurrency slot: at most `max_concurrency`
            # calls are ever in flight or returned but not yet on record. Shielded: calls
            # abandoned when the circuit opens still record what already came back.
            loop = asyncio.get_running_loop()
            return asyncio.shield(loop.run_in_executor(writers, keep, position, verdict))

        async def call() -> list[VerdictT]:
            assert setup.make_judge is not None
            judge = setup.make_judge()
            try:
                asking = asyncio.ensure_future(
                    way.ask(judge, capped, setup.max_concurrency, arrived, stop)
                )
                while not (await asyncio.wait({asking}, timeout=CIRCUIT_WATCH_SECONDS))[0]:
                    if circuit.is_open():  # the calls in flight would only wait out their deadline
                        asking.cancel()
                        await asyncio.wait({asking})
                        raise CircuitOpen()
                return asking.result()
            finally:
                close = getattr(judge, "aclose", None)
                if close is not None:
                    await close()

        def stop() -> BaseException | None:
            if failure:
                return failure[0]
            if spend.guard.stopped is not None:
                return _BudgetSpent()
            return CircuitOpen() if circuit.is_open() else None

        unasked: VerdictT | None = None
        try:
            answers = run_sync(call())
        except (_BudgetSpent, CircuitOpen) as stopped:
            reason = BUDGET_BLOCKED if isinstance(stopped, _BudgetSpent) else CIRCUIT_OPEN
            unasked = way.skipped(reason, pin)
    if unasked is not None:  # every writer is done: `kept` holds each verdict on record
        answers = [kept.get(position, unasked) for position in range(len(batch))]
    if failure:
        raise failure[0]  # the task fails and is retried; what was recorded stays
    spend.close()
    return answers
