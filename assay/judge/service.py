"""The judging service: every judged verdict in Assay goes through here, and only here.

Suite checks (`assay.runs.judging`), pairwise comparisons (`assay.pairwise`), calibration
(`assay.calibration.calibrate`) and the outcome score's judged dimensions (`assay.outcome`) build
their requests and cache keys (`assay.judge.cache`), then hand them to `judge_requests` (one
verdict per output), `judge_repeated` (K per suite check) or `judge_pair_requests` (one verdict
per presented pair). For every batch, in this order:

1. the verdict cache answers what it can — a hit costs nothing (`fresh` bypasses it);
2. the FinOps preflight prices what is left and checks the applicable budgets, after reserving
   the projected spend so that concurrent batches — other runs, other chunks, other workers —
   count it too (`assay.judge.spending.reserve`): `blocked`, `throttled` or `refused` stops the
   spending and every pending verdict is skipped (`budget_blocked`), never passed;
3. the port is called with a run's calls in flight bounded per process by its window
   (`assay.judge.concurrency`: fixed, or adapting to the endpoint), each request capped at
   `max_output_tokens` (what the preflight priced), so a long-winded judge cannot spend past
   the projection. Every call in flight belongs to a batch that reserved its projected spend
   in step 2, so a wider window never reaches past the reservations. In `batch` mode
   (`JudgeSetup.batching`) the calls go through the Batch API instead (`assay.judge.batch`),
   every price at the batch rate;
4. as calls return, their tokens are priced and appended to the cost ledger
   (`assay.judge.spending.Spend`), then their verdicts cached (write-once): nothing paid is lost
   by a kill, a retry or a resume with another chunk layout, and nothing is counted twice. When
   the store cannot take the spend or the verdicts, no further call is started;
5. after every paid call, the batch's actual spend is checked against each `block` budget
   (`assay.judge.spending.Guard`): a judge that bills past `max_tokens` is recorded as it
   reported (the ledger keeps the true cost, and the call is counted in `over_bound`), and once
   a limit is passed no further call starts — the rest are skipped (`budget_blocked`) and the
   batch's decision becomes `blocked`.

A suite run's checks also go through the run's judge circuit (`assay.judge.circuit`): a judge
that fails call after call stops being asked. With no judge configured, every verdict is skipped
with the reason (fail closed).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from typing import Final, Generic, TypeVar

from assay.errors import AssayError
from assay.finops.budget import Budget, Decision
from assay.finops.pricing import Prices, estimate_tokens, price
from assay.judge.batch import Batching, ask_in_batches
from assay.judge.cache import cached_record, repeat_key
from assay.judge.circuit import (
    CIRCUIT_OPEN,
    CIRCUIT_WATCH_SECONDS,
    Circuit,
    CircuitOpen,
    run_circuit,
    unbroken,
)
from assay.judge.concurrency import BillingMemory, reporting_to, run_slots, run_sync
from assay.judge.config import AUTO, DEFAULT_CONCURRENCY_CEILING, Concurrency
from assay.judge.jury import Jury, by_jury
from assay.judge.port import (
    BUDGET_BLOCKED,
    NO_JUDGE,
    Judge,
    JudgePin,
    JudgeRequest,
    PairJudge,
    PairRequest,
    PairVerdict,
    Slots,
    Verdict,
    judge_all,
    judge_pairs_all,
)
from assay.judge.recording import recording
from assay.judge.redaction import NO_REDACTION, RedactionSettings
from assay.judge.spending import (
    BudgetSpent,
    BudgetsRead,
    Guard,
    Spend,
    Spender,
    holding,
    reserve,
)
from assay.store import EvidenceStore

RequestT = TypeVar("RequestT", JudgeRequest, PairRequest)
VerdictT = TypeVar("VerdictT", Verdict, PairVerdict)

FREE: Final = Prices(input_per_million=0, output_per_million=0)
DEFAULT_MAX_OUTPUT_TOKENS: Final = 400
"""Tokens a judge may answer with (reasoning + verdict JSON), and what the preflight prices."""


class JudgeUnsupportedError(AssayError):
    """The configured judge cannot give the kind of verdict asked for (retrying does not help)."""


@dataclass
class JudgeSetup:
    """How this run judges: which judge (or why none), concurrency, prices, budgets."""

    make_judge: Callable[[], Judge] | None
    """Builds the judge inside the batch's event loop; None when no judge is configured."""
    skip_reason: str
    """Why verdicts are skipped when `make_judge` is None (`no judge configured`, …)."""
    model: str | None = None
    prompt_version: str | None = None
    max_concurrency: Concurrency = AUTO
    """Calls in flight at once per process, shared by the run's chunks there: a fixed number,
    or `auto` (adapting to the endpoint, up to `concurrency_ceiling`)."""
    concurrency_ceiling: int = DEFAULT_CONCURRENCY_CEILING
    prices: Prices = field(default_factory=lambda: FREE)
    budgets: list[Budget] | BudgetsRead | None = field(default_factory=list)
    """Applicable budgets, or how to read them (`assay.judge.spending.budgets_once`: at the
    first preflight with something left to ask); None when they could not be read (spending is
    then refused). Read through `applicable_budgets`."""
    fresh: bool = False
    redaction: RedactionSettings = NO_REDACTION
    """What the judge redacts before each call (already part of `prompt_version`)."""
    repeats: int = 1
    """Verdicts asked per suite check (`--judge-repeats`); the check takes the majority."""
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    """Priced by the preflight for every call, and sent as `max_tokens`: the projection bounds
    the spend however long the judge would have answered."""
    batching: Batching | None = None
    """Where uncached calls go through the Batch API (`judge.mode: batch`), priced at the batch
    rate; None: each call is answered at once."""
    jury: Jury | None = None
    """The jurors when this judge is a jury (`assay.judge.jury.convene`): each asked in turn."""
    billing: BillingMemory | None = None
    """What this process last saw the judge's endpoint bill (`assay.judge.concurrency`): a run's
    window opens at once for a judge whose latest reply was billed within its bound."""

    def applicable_budgets(self) -> list[Budget] | None:
        """The budgets, read now if they are read lazily (`budgets`)."""
        return self.budgets() if callable(self.budgets) else self.budgets

    @property
    def pin(self) -> JudgePin:
        """The judge pin verdicts are cached and recorded under."""
        return JudgePin(model=self.model, prompt_version=self.prompt_version)


NO_JUDGE_NEEDED = JudgeSetup(None, NO_JUDGE)
"""For suites without `llm_judge` checks (nothing to configure, nothing to read), and runs
launched where no judge is configured."""


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
    by_juror: list[list[VerdictT]] | None = None
    """A jury's: each juror's verdicts in request order (`assay.judge.agreement`)."""


@dataclass(frozen=True)
class _Way(Generic[RequestT, VerdictT]):
    """How one kind of verdict is asked for, read back, skipped and kept."""

    verdict: type[VerdictT]
    ask: Callable[
        [
            Judge,
            Sequence[RequestT],
            Slots,
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


async def _ask_pairs(
    judge: Judge,
    requests: Sequence[PairRequest],
    limit: Slots,
    on_verdict: Callable[[int, PairVerdict], Awaitable[None] | None],
    stop: Callable[[], BaseException | None],
) -> list[PairVerdict]:
    if not isinstance(judge, PairJudge):
        raise JudgeUnsupportedError(f"the configured judge ({type(judge).__name__}) cannot compare")
    return await judge_pairs_all(judge, requests, limit, on_verdict, stop)


def judged_characters(request: JudgeRequest) -> int:
    """Characters the judge reads for one verdict request (for the spend estimate)."""
    return (
        len(request.input) + len(request.expected or "") + len(request.rubric) + len(request.output)
    )


def projected_tokens(setup: JudgeSetup, lengths: list[int]) -> tuple[int, int]:
    """The input and output tokens the preflight prices for calls reading `lengths` characters
    each: every answer at its cap, `max_output_tokens` (`assay.finops.pricing.estimate_tokens`)."""
    return estimate_tokens(lengths, output_tokens=setup.max_output_tokens)


_VERDICTS: _Way[JudgeRequest, Verdict] = _Way(
    verdict=Verdict,
    ask=judge_all,
    length=judged_characters,
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
        requests: `(cache key, request)` pairs; the key comes from `assay.judge.cache.cache_key`.
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
    return _judge(store, setup, requests, _VERDICTS, spender, unbroken(run_id), first_chunk=chunk)


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
    expanded = with_repeats(requests, k)
    circuit = run_circuit(spender.run_id)
    batch = _judge(store, setup, expanded, _VERDICTS, spender, circuit, first_chunk=chunk)
    return batch, [batch.verdicts[i * k : (i + 1) * k] for i in range(len(requests))]


def with_repeats(
    requests: Sequence[tuple[str, JudgeRequest]], repeats: int
) -> list[tuple[str, JudgeRequest]]:
    """Each request `repeats` times in a row, each repeat under its own cache key (`repeat_key`):
    what `judge_repeated` asks, and the cost plan counts (`assay.runs.cost_plan`)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, not {repeats}")
    return [(repeat_key(key, r), request) for key, request in requests for r in range(repeats)]


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
        unbroken(spender.run_id),
        batch_size=batch_size,
        on_decision=on_decision,
    )


def _judge(
    store: EvidenceStore,
    setup: JudgeSetup,
    requests: Sequence[tuple[str, RequestT]],
    way: _Way[RequestT, VerdictT],
    spender: Spender,
    circuit: Circuit,
    *,
    first_chunk: int = 0,
    batch_size: int | None = None,
    on_decision: Callable[[Decision], None] | None = None,
) -> Judged[VerdictT]:
    if setup.make_judge is None:
        return Judged([way.skipped(setup.skip_reason, None)] * len(requests))
    if setup.jury is not None:  # each juror asked as the only judge, under its own keys
        one = partial(_judge, store, way=way, spender=spender, circuit=circuit)
        ask = partial(one, first_chunk=first_chunk, batch_size=batch_size, on_decision=on_decision)
        return by_jury(setup, requests, ask)
    if setup.batching is not None:  # projected, reserved and recorded at the batch rate
        setup = replace(setup, prices=setup.prices.batch())
    verdicts: list[VerdictT | None] = [None] * len(requests)
    judged: Judged[VerdictT] = Judged(verdicts=[])
    pending: list[int] = []
    for index, (key, _) in enumerate(requests):
        cached = answered_by_cache(store, setup, key)
        if cached is not None:
            verdicts[index] = way.verdict.model_validate_json(cached)
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
            setup.prices, *projected_tokens(setup, [way.length(requests[i][1]) for i in pending])
        )
        reservation, judged.decision, standings = reserve(
            store, setup, spender, first_chunk, projected
        )
        if on_decision is not None:
            on_decision(judged.decision)
        blocked = way.skipped(BUDGET_BLOCKED, setup.pin)
        if judged.decision.allowed:
            guard = Guard(judged.decision, standings)
            with holding(store, reservation):
                size = batch_size or len(pending)
                for number, start in enumerate(range(0, len(pending), size)):
                    batch = pending[start : start + size]
                    if guard.stopped is not None:
                        for index in batch:
                            verdicts[index] = blocked
                        continue
                    spend = Spend(store, setup, spender, first_chunk + number, reservation, guard)
                    asked = [requests[i] for i in batch]
                    answers = _ask(store, setup, way, asked, spend, circuit)
                    for index, verdict in zip(batch, answers, strict=True):
                        verdicts[index] = verdict
                    judged.calls += spend.calls_recorded
                    judged.cost_usd += spend.cost_usd
                    judged.over_bound += spend.over_bound
            judged.decision = guard.stopped or judged.decision
        else:
            for index in pending:
                verdicts[index] = blocked
    judged.verdicts = [verdict for verdict in verdicts if verdict is not None]
    return judged


def answered_by_cache(store: EvidenceStore, setup: JudgeSetup, key: str) -> bytes | None:
    """The verdict cache's answer to the question under `key` (its entry), else None; never
    with `fresh`. One read (`cached_record`), not a check and then a read."""
    return None if setup.fresh else cached_record(store, key)


def _ask(
    store: EvidenceStore,
    setup: JudgeSetup,
    way: _Way[RequestT, VerdictT],
    batch: Sequence[tuple[str, RequestT]],
    spend: Spend,
    circuit: Circuit,
) -> list[VerdictT]:
    """Call the judge on one batch; record the spend and cache the verdicts as they arrive.

    Each returned call's spend is appended to the ledger — one record for the calls returning
    together (`assay.judge.recording`) — and *then* its verdict cached: a verdict is never kept
    (so never re-judged for free) without its spend on record. The call's concurrency slot is
    held until then, so a kill -9 can leave at most the window's calls (`max_concurrency`, or
    `concurrency_ceiling` when `auto`) paid but unrecorded; the writes run on threads,
    overlapping the other calls in flight, so neither their latency (fsync, an S3 round trip)
    nor their I/O blocks the event loop. When a write fails — the
    store cannot take the spend or the evidence — no further call is started; nor when the
    spend passes a block budget (`Guard`), and then the calls not started are skipped
    (`budget_blocked`); nor once the run's judge circuit is open, and then they, and the calls
    still in flight (abandoned), are skipped as `CIRCUIT_OPEN`. Under `judge.mode: batch` the
    Batch API answers them instead (`assay.judge.batch`).
    """
    if setup.batching is not None:
        return ask_in_batches(
            store, setup, _capped(setup, batch), spend, way.cacheable, way.skipped
        )
    pin = setup.pin
    capped = [request for _, request in _capped(setup, batch)]
    slots = run_slots(
        spend.spender.run_id, setup.max_concurrency, setup.concurrency_ceiling, setup.billing
    )
    kept: dict[int, VerdictT] = {}

    def cache(position: int, verdict: VerdictT) -> None:
        if way.cacheable(verdict, pin):
            store.put_once_if_absent(batch[position][0], verdict.model_dump_json().encode())

    with recording(spend, cache, slots.most) as recorder:

        def arrived(position: int, verdict: VerdictT) -> Awaitable[None]:
            # Awaited while the call holds its concurrency slot: at most the window's calls
            # are ever in flight or returned but not yet on record.
            kept[position] = verdict
            circuit.answered(verdict.reason)
            return recorder.arrived(position, verdict)

        async def call() -> list[VerdictT]:
            assert setup.make_judge is not None
            judge = setup.make_judge()
            try:
                with reporting_to(slots):  # the calls' requests widen or halve the window
                    asking = asyncio.ensure_future(way.ask(judge, capped, slots, arrived, stop))
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
            if recorder.failures:
                return recorder.failures[0]
            if spend.guard.stopped is not None:
                return BudgetSpent()
            return CircuitOpen() if circuit.is_open() else None

        unasked: VerdictT | None = None
        try:
            answers = run_sync(call())
        except (BudgetSpent, CircuitOpen) as stopped:
            reason = BUDGET_BLOCKED if isinstance(stopped, BudgetSpent) else CIRCUIT_OPEN
            unasked = way.skipped(reason, pin)
    if unasked is not None:  # every write is done: `kept` holds each verdict on record
        answers = [kept.get(position, unasked) for position in range(len(batch))]
    if recorder.failures:
        raise recorder.failures[0]  # the task fails and is retried; what was recorded stays
    spend.close()
    return answers


def _capped(setup: JudgeSetup, batch: Sequence[tuple[str, RequestT]]) -> list[tuple[str, RequestT]]:
    """The requests, each capped at the `max_output_tokens` the preflight priced."""
    update = {"max_output_tokens": setup.max_output_tokens}
    return [(key, request.model_copy(update=update)) for key, request in batch]
