"""What the ledger says: `assay budget show` (`budget_status`: each budget's current period) and
`assay costs` (`cost_range`, `cost_report`: totals between two days, grouped).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import date, datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict

from assay.errors import InputError
from assay.finops.budget import Budget
from assay.finops.ledger import (
    CostRecord,
    NonNegativeInt,
    Period,
    period_bounds,
    read_costs,
    spent,
    utc_now,
)
from assay.finops.pricing import NonNegativeFloat
from assay.store import EvidenceStore

Grouping = Literal["day", "suite", "subject", "model"]

_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class BudgetStatus(Budget):
    """A budget and where its current period stands, as `assay budget show` reports it."""

    period_start: AwareDatetime
    period_end: AwareDatetime
    """Exclusive: the period is `[period_start, period_end)`, UTC."""
    spent_usd: NonNegativeFloat
    remaining_usd: float
    """`limit_usd - spent_usd`; negative when spending went past the limit (an `alert` budget
    allows that, and a block budget can be passed by actual usage above the estimate)."""
    used_pct: NonNegativeFloat
    """`100 * spent_usd / limit_usd`."""


class CostTotals(BaseModel):
    """Summed ledger records: judge calls, tokens and USD."""

    model_config = ConfigDict(frozen=True)

    records: NonNegativeInt
    """Ledger records summed (one per run chunk that called the judge)."""
    calls: NonNegativeInt
    input_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    cost_usd: NonNegativeFloat


class CostRow(CostTotals):
    """The totals of one group: a UTC day (`YYYY-MM-DD`), a suite, a subject or a model.

    Spend recorded outside a suite (outcome scoring) has the suite `""`.
    """

    key: str


class CostReport(BaseModel):
    """The ledger between two UTC days (inclusive), grouped, with a grand total."""

    model_config = ConfigDict(frozen=True)

    since: date
    until: date
    by: Grouping
    rows: list[CostRow]
    total: CostTotals


def budget_status(
    store: EvidenceStore, budgets: list[Budget], now: datetime | None = None
) -> list[BudgetStatus]:
    """Each budget with the spend recorded in its current period for its scope, by name.

    Budgets sharing a period and a scope read the ledger once.

    Args:
        store: The evidence store holding the cost ledger.
        budgets: The saved budgets.
        now: The moment that picks the periods; timezone-aware; default the current time.

    Returns:
        One status per budget, sorted by name.

    Raises:
        ValueError: `now` is naive.
        pydantic.ValidationError: a ledger record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    current = utc_now(now)
    spent_by: dict[tuple[Period, str], float] = {}
    statuses: list[BudgetStatus] = []
    for budget in sorted(budgets, key=lambda b: b.name):
        key = (budget.period, budget.scope)
        if key not in spent_by:
            spent_by[key] = spent(store, budget.period, budget.scope, current)
        used = spent_by[key]
        start, end = period_bounds(budget.period, current)
        statuses.append(
            BudgetStatus(
                **budget.model_dump(),
                period_start=start,
                period_end=end,
                spent_usd=used,
                remaining_usd=budget.limit_usd - used,
                used_pct=100 * used / budget.limit_usd,
            )
        )
    return statuses


def _parse_day(text: str, option: str) -> date:
    try:
        if _DAY.match(text) is None:
            raise ValueError(text)
        return date.fromisoformat(text)
    except ValueError:
        raise InputError(option, f"{text!r} is not a date; use YYYY-MM-DD (UTC)") from None


def cost_range(
    since: str | None, until: str | None, now: datetime | None = None
) -> tuple[date, date]:
    """The UTC days a cost report covers, from the `--since` / `--until` options.

    Args:
        since: First day, `YYYY-MM-DD`; default the first day of the current UTC month.
        until: Last day (inclusive), `YYYY-MM-DD`; default today (UTC).
        now: The moment that picks the defaults; timezone-aware; default the current time.

    Returns:
        `(first, last)`, inclusive.

    Raises:
        InputError: a date is malformed or does not exist, or `since` is after `until`.
        ValueError: `now` is naive.
    """
    today = utc_now(now).date()
    first = today.replace(day=1) if since is None else _parse_day(since, "--since")
    last = today if until is None else _parse_day(until, "--until")
    if first > last:
        raise InputError("--since", f"{first} is after --until {last}")
    return first, last


_GROUP_KEY: dict[Grouping, Callable[[CostRecord], str]] = {
    "day": lambda record: record.at.date().isoformat(),
    "suite": lambda record: record.suite,
    "subject": lambda record: record.subject,
    "model": lambda record: record.model,
}


def _totals(records: list[CostRecord]) -> CostTotals:
    return CostTotals(
        records=len(records),
        calls=sum(r.calls for r in records),
        input_tokens=sum(r.input_tokens for r in records),
        output_tokens=sum(r.output_tokens for r in records),
        cost_usd=math.fsum(r.cost_usd for r in records),
    )


def summarize_costs(
    records: list[CostRecord], by: Grouping, since: date, until: date
) -> CostReport:
    """Group ledger records and total them.

    Days are listed in date order; suites, subjects and models by spend, largest first (ties
    by name), since "who spent the most" is the question those groupings answer.

    Args:
        records: Ledger records, already limited to `since`…`until` (see `read_costs`).
        by: `day` (UTC date of the spend), `suite`, `subject` or `model`.
        since: First day the records cover, reported as is.
        until: Last day the records cover, reported as is.

    Returns:
        One row per group that has records, and the grand total.
    """
    groups: dict[str, list[CostRecord]] = {}
    for record in records:
        groups.setdefault(_GROUP_KEY[by](record), []).append(record)
    rows = [CostRow(key=key, **_totals(group).model_dump()) for key, group in groups.items()]
    if by == "day":
        rows.sort(key=lambda row: row.key)
    else:
        rows.sort(key=lambda row: (-row.cost_usd, row.key))
    return CostReport(since=since, until=until, by=by, rows=rows, total=_totals(records))


def cost_report(
    store: EvidenceStore, since: date, until: date, by: Grouping, now: datetime | None = None
) -> CostReport:
    """Read the ledger from `since` to `until` (UTC days, inclusive) and summarise it by `by`.

    Days after today are not listed: they cannot hold records yet.

    Raises:
        ValueError: `now` is naive.
        pydantic.ValidationError: a ledger record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    last = min(until, utc_now(now).date())
    return summarize_costs(read_costs(store, since, last), by, since, until)
