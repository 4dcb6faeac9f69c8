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

from assay.finops.ledger import SCOPE, Period, scope_matches, spent, utc_now
from assay.store import EvidenceStore

Mode = Literal["block", "throttle", "alert"]

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

_EXCEEDED: dict[Mode, DecisionStatus] = {
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
    mode: Mode = "block"
    scope: str = "*"

    @field_validator("scope")
    @classmethod
    def _known_scope(cls, scope: str) -> str:
        if SCOPE.match(scope) is None:
            raise ValueError(
                f"scope {scope!r} is not `*`, `suite:NAME` or `subject:KIND:ID[@VARIANT]`"
            )
        return scope


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
) -> Decision:
    """Decide, before a judge task spends anything, whether it may.

    For each budget whose scope covers the suite and subject, the period's recorded spend is
    read from the ledger; when spent + projected exceeds the limit the budget's mode decides:
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

    Returns:
        The decision. `refused` (fail closed) when `budgets` is None or the ledger cannot be
        read; `no_budget` (allowed) when no budget applies.

    Raises:
        ValueError: `projected_usd` is negative or not finite, or `now` is naive.
    """
    if not math.isfinite(projected_usd) or projected_usd < 0:
        raise ValueError("projected spend must be a finite, non-negative amount")
    current = utc_now(now)
    if budgets is None:
        return Decision(
            allowed=False,
            status="refused",
            budget=None,
            limit_usd=None,
            spent_usd=None,
            projected_usd=projected_usd,
            reason="budget store unreadable: judge spending refused (fail closed)",
        )
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
        )
    spent_by: dict[tuple[Period, str], float] = {}
    best: tuple[int, float] | None = None
    decision: Decision | None = None
    for budget in applicable:
        try:
            already = spent_by.get((budget.period, budget.scope))
            if already is None:
                already = spent(store, budget.period, budget.scope, current)
                spent_by[(budget.period, budget.scope)] = already
        except Exception as exc:  # any failure, of any kind, refuses spending (fail closed)
            return Decision(
                allowed=False,
                status="refused",
                budget=budget.name,
                limit_usd=budget.limit_usd,
                spent_usd=None,
                projected_usd=projected_usd,
                reason=(
                    f"cost ledger unreadable for budget {budget.name} "
                    f"({type(exc).__name__}): judge spending refused (fail closed)"
                ),
            )
        total = already + projected_usd
        exceeded = projected_usd > 0 and total > budget.limit_usd + TOLERANCE_USD
        status: DecisionStatus = _EXCEEDED[budget.mode] if exceeded else "allowed"
        relation = ">" if exceeded else "≤"
        reason = (
            f"budget {budget.name} ({budget.mode}, {budget.period}, {budget.scope}): spent "
            f"{usd(already)} + projected {usd(projected_usd)} {relation} limit "
            f"{usd(budget.limit_usd)}"
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
            )
    assert decision is not None
    return decision


def strictest(first: Decision | None, second: Decision | None) -> Decision | None:
    """The more restrictive of two decisions (a run reports the strictest of its chunks')."""
    if first is None or second is None:
        return first or second
    return second if _SEVERITY[second.status] > _SEVERITY[first.status] else first
