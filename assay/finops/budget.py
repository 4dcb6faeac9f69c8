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

from assay.finops.ledger import SCOPE, Period, read_costs, scope_matches, spent, utc_now
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
                holding = _others_holding(store, current, reservation)
            already = spent_by.get((budget.period, budget.scope))
            if already is None:
                already = spent(store, budget.period, budget.scope, current)
                spent_by[(budget.period, budget.scope)] = already
        except Exception as exc:  # any failure, of any kind, refuses spending (fail closed)
            why = f"cost ledger unreadable for budget {budget.name} ({type(exc).__name__})"
            return refused(projected_usd, why, budget), ()
        held = reserved(holding[0], budget.scope, holding[1])
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
    decision: Decision, standings: tuple[Standing, ...], actual_usd: float
) -> Decision | None:
    """The `blocked` decision once a batch's actual spend takes a block budget past its limit.

    The preflight allowed the batch on its projection; a judge that bills more than it was
    asked for (usage past `max_tokens`) can spend past it. Recorded spend plus reservations —
    the period's spend and other batches' holds as the preflight read them, plus this batch's
    actual spend, which then stands for its own (smaller) reservation — is checked after every
    paid call: past a limit, no further call starts (SPEC §8).

    Args:
        decision: The preflight's decision that let the batch spend.
        standings: Where each block budget stood then (`assess`).
        actual_usd: What the batch's calls have cost so far, as recorded in the ledger.

    Returns:
        None while every block budget holds; else the decision naming the budget passed most.
    """
    over = [
        standing
        for standing in standings
        if standing.spent_usd + standing.reserved_usd + actual_usd
        > standing.limit_usd + TOLERANCE_USD
    ]
    if not over:
        return None
    worst = max(over, key=lambda s: s.spent_usd + s.reserved_usd + actual_usd - s.limit_usd)
    held_text = f" + reserved {usd(worst.reserved_usd)}" if worst.reserved_usd else ""
    return Decision(
        allowed=False,
        status="blocked",
        budget=worst.budget,
        limit_usd=worst.limit_usd,
        spent_usd=worst.spent_usd + actual_usd,
        projected_usd=decision.projected_usd,
        reason=(
            f"budget {worst.budget} (block): spent {usd(worst.spent_usd)}{held_text} + actual "
            f"{usd(actual_usd)} (projected {usd(decision.projected_usd)}) > limit "
            f"{usd(worst.limit_usd)}: no further judge call started"
        ),
        reserved_usd=worst.reserved_usd or None,
    )


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


def _others_holding(
    store: EvidenceStore, now: datetime, own: Reservation | None
) -> tuple[list[Reservation], dict[str, float]]:
    """Other batches' live reservations, and what each has recorded in the ledger so far."""
    others = [r for r in live_reservations(store, now) if own is None or r.id != own.id]
    recorded: dict[str, float] = {}
    if others:
        first = min(r.at for r in others).date()
        for record in read_costs(store, first, now.date()):
            if record.reservation is not None:
                recorded[record.reservation] = recorded.get(record.reservation, 0.0) + (
                    record.cost_usd
                )
    return others, recorded


def strictest(first: Decision | None, second: Decision | None) -> Decision | None:
    """The more restrictive of two decisions (a run reports the strictest of its chunks')."""
    if first is None or second is None:
        return first or second
    return second if _SEVERITY[second.status] > _SEVERITY[first.status] else first
