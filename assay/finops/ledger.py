"""The cost ledger (SPEC §8): every judge call's priced usage, appended to the evidence store.

Ledger layout in the evidence store (write-once, like all evidence), dated by `at` (UTC):
    costs/<YYYY>/<MM>/<DD>/<run_id>-<chunk:06d>-p<part>.json     one call's spend
    costs/<YYYY>/<MM>/<DD>/<run_id>-<chunk:06d>-s<batch>.json    a finished batch: its total,
                                                                 covering its calls' records
    costs/<YYYY>/<MM>/<DD>/<run_id>-<chunk:06d>.json             one chunk (older ledgers)

Spend is recorded *as each call returns*, before its verdict is cached: a run killed at any
moment has recorded every call whose verdict it kept, and a resumed or retried chunk — with any
chunk layout — re-judges, and records, only what is not in the cache. Nothing is counted twice
(a call is recorded once, by the attempt that paid for it), and nothing paid is lost but the
calls in flight at a kill. When a batch finishes, one summary record covers its call records,
so a reader fetches the summaries and only the call records no summary covers (those of a
killed batch): reading costs one listing per day and one fetch per batch, not per call.

Reading a period lists one prefix per day of the period, up to and including today, so a check
costs a handful of listings however large the ledger has grown.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, timedelta
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from assay.finops.pricing import NonNegativeFloat
from assay.store import EvidenceStore
from assay.subject import KIND_ID

Period = Literal["day", "week", "month"]

SCOPE = re.compile(
    r"^(?:\*"
    r"|suite:(?P<suite>\S+)"
    rf"|subject:(?P<subject>{KIND_ID})(?:@(?P<variant>\S+))?)$"
)

_RUN_ID = re.compile(r"^[^/\s]+$")
_PART = re.compile(r"^[0-9a-f]{32}$")
_CALL_KEY = re.compile(r"-p(?P<part>[0-9a-f]{32})\.json$")

NonNegativeInt = Annotated[int, Field(ge=0)]


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
    part: str | None = Field(default=None, pattern=_PART.pattern)
    """Set on one call's record: its id (see the module docstring)."""
    batch: str | None = Field(default=None, pattern=_PART.pattern)
    """Set on a finished batch's summary: its id."""
    covers: list[str] = Field(default_factory=list)
    """The call records (`part` ids) a batch summary stands for; readers skip those."""
    reservation: str | None = None
    """The budget reservation this spend was made under (`assay.finops.reservations`)."""

    @field_validator("at")
    @classmethod
    def _in_utc(cls, at: datetime) -> datetime:
        return at.astimezone(UTC)


def _day_prefix(day: date) -> str:
    return f"costs/{day:%Y}/{day:%m}/{day:%d}/"


def cost_key(record: CostRecord) -> str:
    """The ledger key of a record (UTC day): `costs/<YYYY>/<MM>/<DD>/<run_id>-<chunk:06d>.json`,
    `…-p<part>.json` for one call's record, `…-s<batch>.json` for a batch summary."""
    suffix = f"-p{record.part}" if record.part else f"-s{record.batch}" if record.batch else ""
    return f"{_day_prefix(record.at.date())}{record.run_id}-{record.chunk:06d}{suffix}.json"


def record_cost(store: EvidenceStore, record: CostRecord) -> bool:
    """Append a judge spend record to the ledger, once (`put_once_if_absent` on its key).

    Returns:
        True when written now, False when a record with its key was already there.
    """
    return store.put_once_if_absent(cost_key(record), record.model_dump_json().encode())


def utc_now(now: datetime | None) -> datetime:
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
    today = utc_now(now).date()
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


def read_costs(
    store: EvidenceStore,
    first: date,
    last: date,
    run_id: str | None = None,
    known: dict[str, CostRecord] | None = None,
) -> list[CostRecord]:
    """Every ledger record dated from `first` to `last` (UTC days, inclusive), in key order.

    Lists one prefix per day, so the cost is proportional to the days asked for, not to the
    ledger's size. With `run_id`, only that run's records (every attempt's): keys name their
    run, so only the run's keys are listed (`list_starting`), not the day's others. With
    `known`, records already read by this reader (by key) are not fetched again, and those
    fetched now are added: records are write-once, so a reader that reads the ledger after
    every call fetches each record once.

    Raises:
        pydantic.ValidationError: a record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    memo: dict[str, CostRecord] = {} if known is None else known

    def fetch(key: str) -> CostRecord:
        record = memo.get(key)
        if record is None:
            record = memo[key] = CostRecord.model_validate_json(store.get(key))
        return record

    records: list[CostRecord] = []
    calls: dict[str, str] = {}
    covered: set[str] = set()
    day = first
    while day <= last:
        folder = _day_prefix(day)
        keys = store.list(folder) if run_id is None else store.list_starting(f"{folder}{run_id}-")
        for key in keys:
            call = _CALL_KEY.search(key)
            if call is not None:
                calls[call["part"]] = key  # read only if no batch summary covers it
                continue
            record = fetch(key)
            covered.update(record.covers)
            records.append(record)
        day += timedelta(days=1)
    for part, key in calls.items():
        if part not in covered:
            records.append(fetch(key))
    return [r for r in records if run_id is None or r.run_id == run_id]


def scope_matches(scope: str, suite: str, subject: str) -> bool:
    """Whether a budget scope covers a suite and subject (`KIND:ID[@VARIANT]`).

    `*` covers everything; `suite:NAME` covers that suite; `subject:KIND:ID` covers that subject
    in every variant, `subject:KIND:ID@VARIANT` only that variant. An unknown scope covers
    nothing (`Budget` rejects those when it is built).
    """
    match = SCOPE.match(scope)
    if match is None:
        return False
    if scope == "*":
        return True
    if match["suite"] is not None:
        return suite == match["suite"]
    if match["variant"] is not None:
        return subject == f"{match['subject']}@{match['variant']}"
    return subject.partition("@")[0] == match["subject"]


def spent(
    store: EvidenceStore,
    period: Period,
    scope: str,
    now: datetime | None = None,
    known: dict[str, CostRecord] | None = None,
) -> float:
    """Judge spend recorded in the current UTC period for a scope, in USD.

    Only the period's days up to today are listed: later days cannot hold records yet.

    Args:
        store: The evidence store holding the ledger.
        period: `day`, `week` (ISO, from Monday) or `month`.
        scope: A budget scope (see `scope_matches`).
        now: The moment that picks the period; timezone-aware; default the current time.
        known: Records this reader has already read, by key (see `read_costs`).

    Returns:
        The sum of `cost_usd` over matching records in the period.

    Raises:
        ValueError: `now` is naive.
        pydantic.ValidationError: a record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    current = utc_now(now)
    start, end = period_bounds(period, current)
    last = min(current.date(), (end - timedelta(days=1)).date())
    return math.fsum(
        record.cost_usd
        for record in read_costs(store, start.date(), last, known=known)
        if start <= record.at < end and scope_matches(scope, record.suite, record.subject)
    )
