"""Judge costs and the FinOps preflight (SPEC §8): prices, the cost ledger, budgets, decisions.

Every judge call's token usage is priced and appended to a cost ledger in the evidence store;
before each judge task the preflight projects the task's spend and checks it against the
applicable budgets. This module is the pure domain part: it never imports Prefect. Callers
convert the `JudgeSettings` and `FinOpsBudget` blocks into `Prices` and `Budget`, e.g.
`Budget(name=slug, **block.model_dump(include=BUDGET_BLOCK_FIELDS))`.

Ledger layout in the evidence store (write-once, like all evidence):
    costs/<YYYY>/<MM>/<DD>/<run_id>-<chunk:06d>.json      CostRecord, dated by its `at` (UTC)

The key is deterministic, and records are written with `put_once_if_absent`, so a retried or
resumed chunk never counts twice (first writer wins). The retry must carry the same `at` as the
first attempt (e.g. the task's or run's start time); a fresh timestamp that falls on another UTC
day would land under another day's folder and be counted again.

Reading a period lists one prefix per day of the period, up to and including today, so a check
costs a handful of listings however large the ledger has grown.

The same ledger answers `assay budget show` (`budget_status`: each budget's current period)
and `assay costs` (`cost_range`, `cost_report`: totals between two days, grouped).

Fail closed (SPEC §1.2): a budget store that cannot be read, or a ledger that cannot be read
(store error or a corrupt record), refuses spending; it never turns into "no budget".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from assay.errors import InputError
from assay.store import EvidenceStore

Period = Literal["day", "week", "month"]
Mode = Literal["block", "throttle", "alert"]
DecisionStatus = Literal["allowed", "no_budget", "alert", "blocked", "throttled", "refused"]
Grouping = Literal["day", "suite", "subject", "model"]

BUDGET_BLOCK_FIELDS: Final[set[str]] = {"limit_usd", "period", "mode", "scope"}
"""The `FinOpsBudget` block fields that `Budget` shares (everything but the name)."""

CHARS_PER_TOKEN = 4
"""Rough characters per token for English text with common BPE tokenizers (OpenAI's rule of
thumb). Used only to *estimate* spend before a task; the ledger prices the real usage."""

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
_SCOPE = re.compile(
    r"^(?:\*"
    r"|suite:(?P<suite>\S+)"
    r"|subject:(?P<subject>[a-z][a-z0-9_-]*:[^@\s]+)(?:@(?P<variant>\S+))?)$"
)
_RUN_ID = re.compile(r"^[^/\s]+$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")

NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
NonNegativeInt = Annotated[int, Field(ge=0)]


# --- models -----------------------------------------------------------------------------------


class Prices(BaseModel):
    """What the judge model costs, in USD per million tokens (from the `JudgeSettings` block)."""

    model_config = ConfigDict(frozen=True)

    input_per_million: NonNegativeFloat
    output_per_million: NonNegativeFloat


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
        if _SCOPE.match(scope) is None:
            raise ValueError(
                f"scope {scope!r} is not `*`, `suite:NAME` or `subject:KIND:ID[@VARIANT]`"
            )
        return scope


class CostRecord(BaseModel):
    """The judge spend of one chunk of one run: one write-once object in the cost ledger.

    Holds counts and prices only, never case or output text (SPEC §1.4).
    """

    model_config = ConfigDict(frozen=True)

    run_id: str = Field(pattern=_RUN_ID.pattern)
    chunk: NonNegativeInt
    suite: str
    subject: str
    """`KIND:ID[@VARIANT]`, as in run records."""
    model: str
    prompt_version: str
    calls: NonNegativeInt
    input_tokens: NonNegativeInt
    output_tokens: NonNegativeInt
    cost_usd: NonNegativeFloat
    at: AwareDatetime
    """When the spend happened; normalised to UTC. It dates the ledger key."""

    @field_validator("at")
    @classmethod
    def _utc(cls, at: datetime) -> datetime:
        return at.astimezone(UTC)


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


# --- pricing and estimates --------------------------------------------------------------------


def price(prices: Prices, input_tokens: int, output_tokens: int) -> float:
    """What a judge call (or a sum of calls) cost, in USD.

    Args:
        prices: USD per million input and output tokens.
        input_tokens: Prompt tokens, as reported by the endpoint's usage figures.
        output_tokens: Completion tokens, as reported by the endpoint's usage figures.

    Returns:
        The cost in USD.

    Raises:
        ValueError: a token count is negative.
    """
    if input_tokens < 0 or output_tokens < 0:
        raise ValueError("token counts cannot be negative")
    return (
        input_tokens * prices.input_per_million + output_tokens * prices.output_per_million
    ) / 1_000_000


def estimate(requests: int, avg_input_tokens: int, avg_output_tokens: int, prices: Prices) -> float:
    """Projected spend of a judge task, in USD, for the preflight.

    Cache hits cost nothing, so the caller excludes them and passes only the requests that will
    really be sent (pairwise mode sends two per case: one per order).

    Args:
        requests: Judge calls the task will make.
        avg_input_tokens: Mean prompt tokens per call (see `estimate_tokens`).
        avg_output_tokens: Mean completion tokens per call.
        prices: USD per million input and output tokens.

    Returns:
        The projected cost in USD.

    Raises:
        ValueError: a count is negative.
    """
    if requests < 0:
        raise ValueError("requests cannot be negative")
    return price(prices, requests * avg_input_tokens, requests * avg_output_tokens)


def estimate_tokens(
    text_lengths: list[int], prompt_overhead_tokens: int = 250, output_tokens: int = 150
) -> tuple[int, int]:
    """Estimate the tokens of a batch of judge calls without a tokenizer.

    Heuristic: a call's input is its variable text at `CHARS_PER_TOKEN` (4) characters per
    token, rounded up, plus a fixed overhead for the prompt template, rubric and JSON schema;
    its output is a fixed allowance for the reasoning and the verdict. Four characters per token
    is the usual figure for English with BPE tokenizers; other languages and code run denser,
    which is one reason the preflight is a guard rail and the ledger prices the real usage.
    Rounding up errs on the side of a higher projection. Pass the totals to `price`, or their
    per-call means to `estimate`.

    Args:
        text_lengths: Characters of variable text (case input, output, reference…) per call.
        prompt_overhead_tokens: Tokens added to every call by the prompt template.
        output_tokens: Tokens expected back per call.

    Returns:
        `(input_tokens_total, output_tokens_total)` for all the calls.

    Raises:
        ValueError: a length or allowance is negative.
    """
    if prompt_overhead_tokens < 0 or output_tokens < 0 or any(n < 0 for n in text_lengths):
        raise ValueError("lengths and token allowances cannot be negative")
    text_tokens = sum(-(-n // CHARS_PER_TOKEN) for n in text_lengths)
    calls = len(text_lengths)
    return text_tokens + calls * prompt_overhead_tokens, calls * output_tokens


# --- the ledger -------------------------------------------------------------------------------


def _day_prefix(day: date) -> str:
    return f"costs/{day:%Y}/{day:%m}/{day:%d}/"


def cost_key(record: CostRecord) -> str:
    """The ledger key of a record: `costs/<YYYY>/<MM>/<DD>/<run_id>-<chunk:06d>.json` (UTC)."""
    return f"{_day_prefix(record.at.date())}{record.run_id}-{record.chunk:06d}.json"


def record_cost(store: EvidenceStore, record: CostRecord) -> bool:
    """Append one chunk's judge spend to the ledger, once.

    The key depends only on the run, the chunk and the UTC day, and the write is
    `put_once_if_absent`: a retried chunk finds its record there and is not counted again, even
    if its token counts differ slightly (first writer wins).

    Returns:
        True when written now, False when the chunk's record was already there.
    """
    return store.put_once_if_absent(cost_key(record), record.model_dump_json().encode())


def _utc(now: datetime | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("`now` must be timezone-aware (budget periods are UTC)")
    return now.astimezone(UTC)


def period_bounds(period: Period, now: datetime | None = None) -> tuple[datetime, datetime]:
    """The current UTC period containing `now`, as `[start, end)`.

    `day` is today; `week` is the ISO week, Monday 00:00 to the next Monday; `month` is the
    calendar month.

    Raises:
        ValueError: `now` is naive (a local time would shift the period by hours).
    """
    today = _utc(now).date()
    if period == "day":
        first, after = today, today + timedelta(days=1)
    elif period == "week":
        first = today - timedelta(days=today.weekday())
        after = first + timedelta(days=7)
    else:
        first = today.replace(day=1)
        after = (first + timedelta(days=32)).replace(day=1)
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    return start, datetime(after.year, after.month, after.day, tzinfo=UTC)


def read_costs(store: EvidenceStore, first: date, last: date) -> list[CostRecord]:
    """Every ledger record dated from `first` to `last` (UTC days, inclusive), in key order.

    Lists one prefix per day, so the cost is proportional to the days asked for, not to the
    ledger's size.

    Raises:
        pydantic.ValidationError: a record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    records: list[CostRecord] = []
    day = first
    while day <= last:
        for key in store.list(_day_prefix(day)):
            records.append(CostRecord.model_validate_json(store.get(key)))
        day += timedelta(days=1)
    return records


def scope_matches(scope: str, suite: str, subject: str) -> bool:
    """Whether a budget scope covers a suite and subject (`KIND:ID[@VARIANT]`).

    `*` covers everything; `suite:NAME` covers that suite; `subject:KIND:ID` covers that subject
    in every variant, `subject:KIND:ID@VARIANT` only that variant. An unknown scope covers
    nothing (`Budget` rejects those when it is built).
    """
    match = _SCOPE.match(scope)
    if match is None:
        return False
    if scope == "*":
        return True
    if match["suite"] is not None:
        return suite == match["suite"]
    if match["variant"] is not None:
        return subject == f"{match['subject']}@{match['variant']}"
    return subject.partition("@")[0] == match["subject"]


def spent(store: EvidenceStore, period: Period, scope: str, now: datetime | None = None) -> float:
    """Judge spend recorded in the current UTC period for a scope, in USD.

    Only the period's days up to today are listed: later days cannot hold records yet.

    Args:
        store: The evidence store holding the ledger.
        period: `day`, `week` (ISO, from Monday) or `month`.
        scope: A budget scope (see `scope_matches`).
        now: The moment that picks the period; timezone-aware; default the current time.

    Returns:
        The sum of `cost_usd` over matching records in the period.

    Raises:
        ValueError: `now` is naive.
        pydantic.ValidationError: a record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    current = _utc(now)
    start, end = period_bounds(period, current)
    last = min(current.date(), (end - timedelta(days=1)).date())
    return math.fsum(
        record.cost_usd
        for record in read_costs(store, start.date(), last)
        if start <= record.at < end and scope_matches(scope, record.suite, record.subject)
    )


# --- preflight --------------------------------------------------------------------------------


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
    current = _utc(now)
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


# --- reporting: budget status and cost summaries ----------------------------------------------


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
    current = _utc(now)
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
    today = _utc(now).date()
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
    last = min(until, _utc(now).date())
    return summarize_costs(read_costs(store, since, last), by, since, until)
