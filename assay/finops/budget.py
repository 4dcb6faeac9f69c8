"""Budgets and the FinOps preflight (SPEC §8): before each judge task, project its spend and check
it against the applicable budgets.

Pure domain: it never imports Prefect. Callers convert the `JudgeSettings` and `FinOpsBudget`
blocks into `Prices` and `Budget`, e.g.
`Budget(name=slug, **block.model_dump(include=BUDGET_BLOCK_FIELDS))`.

Fail closed (SPEC §1.2): a budget store that cannot be read, or a ledger that cannot be read
(store error or a corrupt record), refuses spending; it never turns into "no budget".
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from assay.finops.ledger import (
    SCOPE,
    CostRecord,
    Period,
    read_costs,
    scope_matches,
    spent,
    utc_now,
)
from assay.finops.reservations import Reservation, live_reservations, reserved
from assay.store import EvidenceStore

BudgetMode = Literal["block", "throttle", "alert"]

DecisionStatus = Literal["allowed", "no_budget", "alert", "blocked", "throttled", "refused"]

BUDGET_BLOCK_FIELDS: Final[set[str]] = {"limit_usd", "period", "mode", "scope"}
"""The `FinOpsBudget` block fields that `Budget` shares (everything but the name)."""

TOLERANCE_USD = 1e-9
"""Float noise below a nano-dollar never makes a projection exceed a limit."""

_SEVERITY: dict[DecisionStatus, int] = {
    "no_budget": 0,
    "allowed": 1,
    "alert": 2,
    "throttled": 3,
    "blocked": 4,
    "refused": 5,
}

_EXCEEDED: dict[BudgetMode, DecisionStatus] = {
    "block": "blocked",
    "throttle": "throttled",
    "alert": "alert",
}


class Budget(BaseModel):
    """One spending limit, with the same fields as the `FinOpsBudget` block plus its name.

    `scope` is `*` (everything), `suite:NAME`, or `subject:KIND:ID` (any variant of that
    subject; `subject:KIND:ID@VARIANT` narrows it to one variant). An unrecognised scope is a
    validation error, so a malformed block is treated by the caller as an unreadable budget
    store (refused), never silently as a budget that applies to nothing.
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    limit_usd: float = Field(gt=0, allow_inf_nan=False)
    period: Period = "month"
    mode: BudgetMode = "block"
    scope: str = "*"

    @field_validator("scope")
    @classmethod
    def _known_scope(cls, scope: str) -> str:
        if SCOPE.match(scope) is None:
            raise ValueError(
                f"scope {scope!r} is not `*`, `suite:NAME` or `subject:KIND:ID[@VARIANT]`"
            )
        return scope


class Standing(BaseModel):
    """Where one applicable `block` budget stood when a batch was allowed to spend."""

    model_config = ConfigDict(frozen=True)

    budget: str
    limit_usd: float
    spent_usd: float
    """The period's recorded spend in the budget's scope."""
    reserved_usd: float
    """What other batches' live reservations held against it."""
    reservations: frozenset[str] = frozenset()
    """Those reservations' ids: the batch was allowed alongside them, so its checks after each
    call count them (a batch that reserves later counts this one in its own preflight)."""


class Decision(BaseModel):
    """The preflight's answer for one judge task, and the numbers behind it.

    `budget`, `limit_usd` and `spent_usd` describe the deciding budget: the most restrictive
    outcome, and among equals the budget with the least headroom. They are None when there is
    no such budget (`no_budget`, or `refused` because the budgets could not be read).
    """

    model_config = ConfigDict(frozen=True)

    allowed: bool
    status: DecisionStatus
    budget: str | None
    limit_usd: float | None
    spent_usd: float | None
    projected_usd: float
    reason: str
    reserved_usd: float | None = None
    """What other batches' live reservations held against the deciding budget (None: nothing)."""

    @property
    def contended(self) -> bool:
        """Stopped only because of other batches' reservations: with them released, it fits."""
        if self.allowed or None in (self.limit_usd, self.spent_usd) or not self.reserved_usd:
            return False
        assert self.limit_usd is not None and self.spent_usd is not None
        return self.spent_usd + self.projected_usd <= self.limit_usd + TOLERANCE_USD


def usd(amount: float) -> str:
    """An amount in USD to four decimals (judge calls cost fractions of a cent), e.g. `-$0.0100`."""
    return f"-${-amount:.4f}" if amount < 0 else f"${amount:.4f}"


def preflight(
    store: EvidenceStore,
    budgets: list[Budget] | None,
    projected_usd: float,
    suite: str,
    subject: str,
    now: datetime | None = None,
    reservation: Reservation | None = None,
) -> Decision:
    """Decide, before a judge task spends anything, whether it may (see `assess`)."""
    return assess(store, budgets, projected_usd, suite, subject, now, reservation)[0]


def assess(
    store: EvidenceStore,
    budgets: list[Budget] | None,
    projected_usd: float,
    suite: str,
    subject: str,
    now: datetime | None = None,
    reservation: Reservation | None = None,
) -> tuple[Decision, tuple[Standing, ...]]:
    """Decide, before a judge task spends anything, whether it may.

    For each budget whose scope covers the suite and subject, the period's recorded spend is
    read from the ledger, and what other batches have reserved but not yet recorded is added
    (`assay.finops.reservations`; the caller reserves its own projection *before* calling, so two
    concurrent batches always see at least one of each other's reservations); when spent +
    reserved + projected exceeds the limit the budget's mode decides:
    `block` → `blocked` and `throttle` → `throttled` (both stop spending: the task's judge cases
    are skipped as `budget_blocked`; a throttle budget additionally tells the caller to lower
    its judge concurrency for the next task, which this function does not do), `alert` →
    `alert` (spending goes ahead and is reported). The most restrictive outcome across the
    applicable budgets wins: refused > blocked > throttled > alert > allowed.

    A task that will spend nothing (all cache hits) cannot exceed a budget, even one already
    used up, so cached verdicts stay available.

    Args:
        store: The evidence store holding the cost ledger.
        budgets: The configured budgets, or None when the budget store could not be read.
        projected_usd: The task's projected spend (see `estimate`), cache hits excluded.
        suite: The suite the task judges.
        subject: The subject, `KIND:ID[@VARIANT]`.
        now: The moment that picks the periods; timezone-aware; default the current time.
        reservation: The caller's own reservation of `projected_usd`, not counted twice.

    Returns:
        The decision — `refused` (fail closed) when `budgets` is None or the ledger or the
        reservations cannot be read; `no_budget` (allowed) when no budget applies — and where
        each applicable `block` budget stood, for checking the actual spend (`spent_past`).

    Raises:
        ValueError: `projected_usd` is negative or not finite, or `now` is naive.
    """
    if not math.isfinite(projected_usd) or projected_usd < 0:
        raise ValueError("projected spend must be a finite, non-negative amount")
    current = utc_now(now)
    if budgets is None:
        return refused(projected_usd, "budget store unreadable"), ()
    applicable = [b for b in budgets if scope_matches(b.scope, suite, subject)]
    if not applicable:
        return Decision(
            allowed=True,
            status="no_budget",
            budget=None,
            limit_usd=None,
            spent_usd=None,
            projected_usd=projected_usd,
            reason=f"no budget applies to suite {suite} and subject {subject}",
        ), ()
    spent_by: dict[tuple[Period, str], float] = {}
    best: tuple[int, float] | None = None
    decision: Decision | None = None
    holding: tuple[list[Reservation], dict[str, float]] | None = None
    blocks: list[Standing] = []
    for budget in applicable:
        try:
            if holding is None:
                holding = _live_holding(store, current)
            already = spent_by.get((budget.period, budget.scope))
            if already is None:
                already = spent(store, budget.period, budget.scope, current)
                spent_by[(budget.period, budget.scope)] = already
        except Exception as exc:  # any failure, of any kind, refuses spending (fail closed)
            why = f"cost ledger unreadable for budget {budget.name} ({type(exc).__name__})"
            return refused(projected_usd, why, budget), ()
        own = reservation.id if reservation else None
        counted = [
            r for r in holding[0] if r.id != own and scope_matches(budget.scope, r.suite, r.subject)
        ]
        held = reserved(counted, budget.scope, holding[1])
        total = already + held + projected_usd
        exceeded = projected_usd > 0 and total > budget.limit_usd + TOLERANCE_USD
        status: DecisionStatus = _EXCEEDED[budget.mode] if exceeded else "allowed"
        relation = ">" if exceeded else "≤"
        held_text = f" + reserved {usd(held)}" if held else ""
        reason = (
            f"budget {budget.name} ({budget.mode}, {budget.period}, {budget.scope}): spent "
            f"{usd(already)}{held_text} + projected {usd(projected_usd)} {relation} limit "
            f"{usd(budget.limit_usd)}"
        )
        if budget.mode == "block":
            blocks.append(
                Standing(
                    budget=budget.name,
                    limit_usd=budget.limit_usd,
                    spent_usd=already,
                    reserved_usd=held,
                    reservations=frozenset(r.id for r in counted),
                )
            )
        rank = (_SEVERITY[status], total - budget.limit_usd)
        if best is None or rank > best:
            best = rank
            decision = Decision(
                allowed=status in ("allowed", "alert"),
                status=status,
                budget=budget.name,
                limit_usd=budget.limit_usd,
                spent_usd=already,
                projected_usd=projected_usd,
                reason=reason,
                reserved_usd=held or None,
            )
    assert decision is not None
    return decision, tuple(blocks)


def spent_past(
    store: EvidenceStore,
    budgets: list[tuple[Budget, Standing]],
    now: datetime,
    own: Reservation | None,
    next_call_usd: float,
    projected_usd: float,
    known: dict[str, CostRecord] | None = None,
) -> Decision | None:
    """The `blocked` decision once the period's spend takes a block budget past its limit.

    Checked after every paid call of a batch (SPEC §8), from the ledger as it stands *now*: the
    total actual spend of every batch and run in the budget's scope and period, plus what live
    reservations still hold of what they have not recorded — those of the other batches the
    preflight counted (`Standing.reservations`; a batch that reserved since counted this one),
    and the batch's own, or, once a call has billed past its reservation, the cost of one more
    call as billed (`next_call_usd`), whichever is more. Past a limit, no further call starts.
    A batch's own actual spend is never the only spend it counts.

    Args:
        store: The evidence store holding the ledger and the reservations.
        budgets: The block budgets that applied at the batch's preflight, with their standing.
        now: The moment that picks the periods (the batch's, as at its preflight).
        own: The batch's reservation, if it holds one.
        next_call_usd: What the next call is expected to cost when the batch's reservation no
            longer prices it (0 while it does).
        projected_usd: The batch's projection at its preflight (for the decision).
        known: Ledger records this checker has already read (see `read_costs`).

    Returns:
        None while every budget holds; else the decision naming the budget passed most.

    Raises:
        pydantic.ValidationError: a ledger or reservation record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    current = utc_now(now)
    live, recorded = _live_holding(store, current, known)
    own_left = max(0.0, own.amount_usd - recorded.get(own.id, 0.0)) if own else 0.0
    coming = max(own_left, next_call_usd)
    worst: tuple[float, Decision] | None = None
    for budget, standing in budgets:
        total = spent(store, budget.period, budget.scope, current, known)
        counted = [r for r in live if r.id in standing.reservations]
        held = reserved(counted, budget.scope, recorded)
        past = total + held + coming - budget.limit_usd
        if past <= TOLERANCE_USD or (worst is not None and past <= worst[0]):
            continue
        held_text = f" + reserved by others {usd(held)}" if held else ""
        worst = (
            past,
            Decision(
                allowed=False,
                status="blocked",
                budget=budget.name,
                limit_usd=budget.limit_usd,
                spent_usd=total,
                projected_usd=projected_usd,
                reason=(
                    f"budget {budget.name} (block, {budget.period}, {budget.scope}): spent "
                    f"{usd(total)} by every run{held_text} + next {usd(coming)} > limit "
                    f"{usd(budget.limit_usd)}: no further judge call started"
                ),
                reserved_usd=held or None,
            ),
        )
    return worst[1] if worst else None


def refused(projected_usd: float, why: str, budget: Budget | None = None) -> Decision:
    """The fail-closed decision: spending refused because of `why` (an unreadable budget…)."""
    return Decision(
        allowed=False,
        status="refused",
        budget=budget.name if budget else None,
        limit_usd=budget.limit_usd if budget else None,
        spent_usd=None,
        projected_usd=projected_usd,
        reason=f"{why}: judge spending refused (fail closed)",
    )


def _live_holding(
    store: EvidenceStore, now: datetime, known: dict[str, CostRecord] | None = None
) -> tuple[list[Reservation], dict[str, float]]:
    """The live reservations, and what each has recorded in the ledger so far."""
    live = live_reservations(store, now)
    recorded: dict[str, float] = {}
    if live:
        first = min(r.at for r in live).date()
        for record in read_costs(store, first, now.date(), known=known):
            if record.reservation is not None:
                recorded[record.reservation] = recorded.get(record.reservation, 0.0) + (
                    record.cost_usd
                )
    return live, recorded


def strictest(first: Decision | None, second: Decision | None) -> Decision | None:
    """The more restrictive of two decisions (a run reports the strictest of its chunks')."""
    if first is None or second is None:
        return first or second
    return second if _SEVERITY[second.status] > _SEVERITY[first.status] else first
