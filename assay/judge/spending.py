"""A judging's spend: reserved before, checked as it goes, handed to the ledger as it returns.

For every batch the service (`assay.judge.service`) asks the judge for:

- before any call, the batch *reserves* its projected spend (`assay.finops.reservations`) and
  runs the FinOps preflight counting everyone else's reservations (`reserve`): `blocked`,
  `throttled` or `refused` stops the spending; while the batch judges its reservation is renewed
  (`holding`: a batch waiting hours for the Batch API keeps its headroom), and it is
  released once the actual spend is in the ledger;
- as calls return, their tokens are priced and appended to the cost ledger, one record per group
  of calls returning together (`assay.judge.recording`), then one summary per batch that stands
  for them (`Spend`);
- after every paid call, the period's total spend — every batch and run, from the ledger —
  plus the live reservations is checked against each `block` budget (`Guard`,
  `assay.finops.budget.spent_past`): once a limit is passed no further call of the run starts;
- a call billed past its reservation corrects the run's reservation model (`RunBilling`): from
  then on each further call is counted at what such a call was billed before it may start, and
  the run's window of calls in flight is back to one (`assay.judge.concurrency`), so past a
  block budget a run overshoots by at most one call's billed cost.
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from assay.finops import reservations
from assay.finops.budget import (
    TOLERANCE_USD,
    Budget,
    Decision,
    Standing,
    assess,
    refused,
    spent_past,
)
from assay.finops.ledger import CostRecord, record_cost, scope_matches
from assay.finops.pricing import price
from assay.finops.reservations import Reservation, release
from assay.judge.port import PairVerdict, Verdict
from assay.process_state import remembered
from assay.store import EvidenceStore

if TYPE_CHECKING:
    from assay.judge.service import JudgeSetup

CONTENTION_RETRIES: Final = 3
CONTENTION_PAUSE_SECONDS: Final = 0.2
RUNS_KEPT: Final = 256
"""Runs whose billing this process remembers (the oldest is forgotten first)."""


BudgetsRead = Callable[[], list[Budget] | None]
"""How a judging's budgets are read: the list, or None when they cannot be (spending refused)."""


def budgets_once(read: BudgetsRead) -> BudgetsRead:
    """`read`, called on first use only and its answer kept, however many threads ask.

    A judge setup reads its budgets through this at the first preflight that has something left
    to ask (`reserve`), so a batch the verdict cache answers whole never reads them."""
    lock = threading.Lock()
    kept: list[list[Budget] | None] = []

    def budgets() -> list[Budget] | None:
        with lock:
            if not kept:
                kept.append(read())
            return kept[0]

    return budgets


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


def reserve(
    store: EvidenceStore, setup: JudgeSetup, spender: Spender, chunk: int, projected: float
) -> tuple[Reservation | None, Decision, tuple[Standing, ...]]:
    """Reserve the projected spend, then run the preflight counting everyone else's reservations.

    Reserving *before* reading means two concurrent batches always see at least one of each
    other's reservations, so together they cannot pass a limit that each alone fits under. When
    only other live reservations stop a batch (`Decision.contended`), it withdraws and tries
    again after a random pause, so a race ends with one winner rather than two losers. A batch
    of a run whose calls have billed past their reservation reserves at least one call as
    billed (`RunBilling.per_call_usd`): its first call must fit too.
    Returns the reservation (when one is held), the decision and the block budgets' standings.
    """
    if projected > 0:
        projected = max(projected, run_billing(spender.run_id).per_call_usd)

    budgets = setup.applicable_budgets()

    def check(reservation: Reservation | None) -> tuple[Decision, tuple[Standing, ...]]:
        return assess(
            store,
            budgets,
            projected,
            spender.suite,
            spender.subject,
            spender.at,
            reservation=reservation,
        )

    if projected <= 0 or not any(
        scope_matches(budget.scope, spender.suite, spender.subject) for budget in budgets or []
    ):
        return None, *check(None)  # nothing to hold: no spend, no budget, or budgets unreadable
    for attempt in range(CONTENTION_RETRIES + 1):
        try:
            reservation = reservations.reserve(
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


@contextmanager
def holding(store: EvidenceStore, reservation: Reservation | None) -> Iterator[None]:
    """Hold `reservation` while the block judges, then release it (its spend is on record).

    It is renewed every third of its lifetime, so it never expires under a judging that
    outlasts it; a crashed process stops renewing, and what it held lapses a lifetime later —
    as it does when the release cannot be written."""
    if reservation is None:
        yield
        return
    done = threading.Event()
    every = reservations.ttl_seconds() / 3

    def keep() -> None:
        while not done.wait(every):
            with suppress(Exception):  # a store hiccup: the next tick renews it
                if not reservations.renew(store, reservation):
                    return

    keeper = threading.Thread(target=keep, name="assay-reservation-keeper", daemon=True)
    keeper.start()
    try:
        yield
    finally:
        done.set()
        keeper.join()
        with suppress(Exception):
            release(store, reservation)


@dataclass
class RunBilling:
    """What a run's calls in this process have shown of its judge's billing, shared by the
    run's batches (its chunks here): the reservation model's correction, and the stop."""

    per_call_usd: float = 0.0
    """The most one call was billed past its reservation (0: none was); once set, each further
    call counts at it before it may start."""
    stop: tuple[float, Decision] | None = None
    """When (`time.monotonic`) and why the run's spend passed a block budget."""


_RUNS: dict[str, RunBilling] = {}
_RUNS_LOCK = threading.Lock()
remembered(__name__, "_RUNS", _RUNS.clear, _RUNS_LOCK)


def run_billing(run_id: str) -> RunBilling:
    """The billing this process has seen of a run's calls (one per run, for all its chunks)."""
    with _RUNS_LOCK:
        found = _RUNS.get(run_id)
        if found is None:
            if len(_RUNS) >= RUNS_KEPT:
                _RUNS.pop(next(iter(_RUNS)))
            found = _RUNS[run_id] = RunBilling()
        return found


@dataclass
class Guard:
    """A judging's spend against its block budgets, from the ledger after every paid call."""

    decision: Decision
    """The preflight's decision that let it spend."""
    standings: tuple[Standing, ...]
    """The block budgets that applied at the preflight: the ones checked after every call."""
    actual_usd: float = 0.0
    _stopped: Decision | None = None
    _run: RunBilling | None = None
    _began: float = field(default_factory=time.monotonic)
    _known: dict[str, CostRecord] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def stopped(self) -> Decision | None:
        """The `blocked` decision, once the spend passed a block budget's limit: this
        judging's, or that of another batch of its run since this one began."""
        if self._stopped is None and self._run is not None and self._run.stop is not None:
            at, why = self._run.stop
            if at >= self._began:
                return why
        return self._stopped

    def joined(self, run_id: str) -> None:
        """A batch of run `run_id` spends under this guard (before any of its calls)."""
        self._run = run_billing(run_id)

    def paid(self, spend: Spend, billed: Sequence[tuple[float, float]]) -> None:
        """Calls of `spend` were billed: each one's (cost, what it was reserved), in USD."""
        run = self._run or run_billing(spend.spender.run_id)
        with self._lock:
            for cost_usd, allowance_usd in billed:
                self.actual_usd += cost_usd
                if cost_usd > allowance_usd + TOLERANCE_USD:  # the reservation model was wrong
                    run.per_call_usd = max(run.per_call_usd, cost_usd)
            if self._stopped is not None or not self.standings:
                return
            by_name = {budget.name: budget for budget in spend.setup.applicable_budgets() or []}
            self._stopped = spent_past(
                spend.store,
                [(by_name[s.budget], s) for s in self.standings if s.budget in by_name],
                spend.spender.at,
                spend.reservation,
                run.per_call_usd,
                self.decision.projected_usd,
                self._known,
            )
            if self._stopped is not None:
                run.stop = time.monotonic(), self._stopped


class BudgetSpent(Exception):
    """Stops a batch's calls: its actual spend passed a block budget (see `Guard`)."""


@dataclass
class Spend:
    """Records one batch's spend in the ledger as its calls return (see `assay.finops.ledger`)."""

    store: EvidenceStore
    setup: JudgeSetup
    spender: Spender
    chunk: int
    reservation: Reservation | None
    guard: Guard
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    over_bound: int = 0
    calls_recorded: int = 0
    """The calls whose spend is on record (the ledger records below may each stand for several)."""
    parts: list[str] = field(default_factory=list)
    """The ledger records of its calls (one per group that returned together)."""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.guard.joined(self.spender.run_id)

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

    def calls(self, verdicts: Sequence[Verdict | PairVerdict]) -> None:
        """Append the spend of calls that returned together to the ledger: one write-once
        record for the group (`calls` = its size; see `assay.judge.recording`)."""
        part = uuid.uuid4().hex
        used_in = sum(verdict.input_tokens for verdict in verdicts)
        used_out = sum(verdict.output_tokens for verdict in verdicts)
        cost = self._record(len(verdicts), used_in, used_out, part=part)
        with self._lock:
            self.parts.append(part)
            self.calls_recorded += len(verdicts)
            self.cost_usd += cost
            self.input_tokens += used_in
            self.output_tokens += used_out
            self.over_bound += sum(
                verdict.output_tokens > self.setup.max_output_tokens for verdict in verdicts
            )
        # Reserved per call: its input as billed, its output at the allowance it was sent with.
        billed = [
            (
                price(self.setup.prices, verdict.input_tokens, verdict.output_tokens),
                price(self.setup.prices, verdict.input_tokens, self.setup.max_output_tokens),
            )
            for verdict in verdicts
        ]
        self.guard.paid(self, billed)

    def close(self) -> None:
        """Write the batch's summary, which stands for its calls' records from now on."""
        if self.parts:
            self._record(
                self.calls_recorded,
                self.input_tokens,
                self.output_tokens,
                batch=uuid.uuid4().hex,
                covers=sorted(self.parts),
            )
