"""Budget reservations: spend that concurrent judge batches see before it is spent (SPEC §8, §14).

A preflight that only reads the ledger can be beaten: two batches (two runs, or two chunks of one
run on two workers) both read "$0 spent", both fit under the limit, and both spend. So a batch
first *reserves* its projected spend — one write-once record — and only then runs the preflight,
which counts every other live reservation in the budget's scope beside the recorded spend. Once
the batch's actual cost is in the ledger it writes a release marker and the reservation stops
counting. While it runs, its ledger records carry the reservation id, so the reserved amount
shrinks by what it has already recorded (no double count).

Layout in the evidence store (write-once, like all evidence):
    reservations/<YYYY>/<MM>/<DD>/<id>.json              Reservation, dated by its `at` (UTC)
    reservations/<YYYY>/<MM>/<DD>/<id>.until-<unix>      a renewal: held until then
    reservations/<YYYY>/<MM>/<DD>/<id>.released          its release marker

A reservation lives `ttl_seconds` (`ASSAY_RESERVATION_TTL_SECONDS`, default `DEFAULT_TTL_SECONDS`
= one hour; at most a day) past its last renewal. The process judging renews it while it judges
(`assay/judge/spending.py`, `holding`), so a judging longer than the lifetime — a batch
waiting up to a day for the Batch API — never lets its headroom lapse, while one left behind by
a crashed worker expires a lifetime after the crash. Renewals stop `MAX_HELD_SECONDS` after the
reservation was made, so readers list the folders of the last `MAX_HELD_SECONDS` only.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Final

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from assay.errors import InputError
from assay.finops.ledger import scope_matches, utc_now
from assay.finops.pricing import NonNegativeFloat
from assay.store import EvidenceStore

TTL_ENV: Final = "ASSAY_RESERVATION_TTL_SECONDS"
DEFAULT_TTL_SECONDS: Final = 3600
MAX_TTL_SECONDS: Final = 86_400
MAX_HELD_SECONDS: Final = 3 * 86_400
"""How long renewals may keep a reservation alive: the Batch API's deadline (48 h,
`assay/judge/batch.py`) and a lifetime. Readers look back this far."""
PREFIX: Final = "reservations/"
RELEASED: Final = ".released"
RENEWED: Final = ".until-"


class Reservation(BaseModel):
    """Projected judge spend held against the budgets while one batch judges (no text)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(pattern=r"^[0-9a-f]{32}$")
    run_id: str
    chunk: int = Field(ge=0)
    suite: str
    subject: str
    amount_usd: NonNegativeFloat
    at: AwareDatetime
    expires_at: AwareDatetime

    @property
    def key(self) -> str:
        return f"{_day_prefix(self.at)}{self.id}.json"


def _day_prefix(at: datetime) -> str:
    return f"{PREFIX}{at:%Y}/{at:%m}/{at:%d}/"


def ttl_seconds() -> int:
    """The reservation lifetime from `ASSAY_RESERVATION_TTL_SECONDS` (default one hour).

    Raises:
        InputError: the setting is not a whole number of seconds from 1 to 86,400.
    """
    text = os.environ.get(TTL_ENV, str(DEFAULT_TTL_SECONDS)).strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_TTL_SECONDS:
        raise InputError(TTL_ENV, f"must be a whole number of seconds from 1 to {MAX_TTL_SECONDS}")
    return int(text)


def reserve(
    store: EvidenceStore,
    *,
    run_id: str,
    chunk: int,
    suite: str,
    subject: str,
    amount_usd: float,
    now: datetime | None = None,
) -> Reservation:
    """Hold `amount_usd` against every budget covering the suite and subject (write-once)."""
    at = utc_now(now)
    reservation = Reservation(
        id=uuid.uuid4().hex,
        run_id=run_id,
        chunk=chunk,
        suite=suite,
        subject=subject,
        amount_usd=amount_usd,
        at=at,
        expires_at=at + timedelta(seconds=ttl_seconds()),
    )
    store.put_once(reservation.key, reservation.model_dump_json().encode())
    return reservation


def renew(store: EvidenceStore, reservation: Reservation, now: datetime | None = None) -> bool:
    """Hold `reservation` for another lifetime from `now` (a write-once renewal marker);
    False once it was made `MAX_HELD_SECONDS` ago (it then expires as it stands)."""
    until = utc_now(now) + timedelta(seconds=ttl_seconds())
    if until > reservation.at + timedelta(seconds=MAX_HELD_SECONDS):
        return False
    marker = f"{reservation.key.removesuffix('.json')}{RENEWED}{math.ceil(until.timestamp())}"
    store.put_once_if_absent(marker, b"{}")
    return True


def release(store: EvidenceStore, reservation: Reservation) -> None:
    """Stop counting a reservation (its batch's actual cost is in the ledger by now)."""
    marker = reservation.key.removesuffix(".json") + RELEASED
    store.put_once_if_absent(marker, b"{}")


def live_reservations(store: EvidenceStore, now: datetime | None = None) -> list[Reservation]:
    """Every reservation neither released nor expired at `now`.

    Raises:
        pydantic.ValidationError: a reservation record is corrupt.
        Exception: whatever the store raises when it cannot be read.
    """
    current = utc_now(now)
    keys: set[str] = set()
    for days_ago in range(math.ceil(MAX_HELD_SECONDS / 86_400), -1, -1):
        keys.update(store.list(_day_prefix(current - timedelta(days=days_ago))))
    renewed_until: dict[str, float] = {}
    for key in keys:
        stem, renewed, until = key.rpartition("/")[2].partition(RENEWED)
        if renewed and until.isdigit():
            renewed_until[stem] = max(renewed_until.get(stem, 0.0), float(until))
    live = []
    for key in sorted(keys):
        if not key.endswith(".json") or key.removesuffix(".json") + RELEASED in keys:
            continue
        reservation = Reservation.model_validate_json(store.get(key))
        expires = max(reservation.expires_at.timestamp(), renewed_until.get(reservation.id, 0.0))
        if current.timestamp() < expires:
            live.append(reservation)
    return live


def reserved(
    reservations: Iterable[Reservation],
    scope: str,
    recorded: Mapping[str, float],
) -> float:
    """What live reservations in `scope` still hold, in USD.

    Args:
        reservations: The live reservations (see `live_reservations`).
        scope: A budget scope (see `scope_matches`).
        recorded: Spend already in the ledger per reservation id; a reservation holds only
            what its batch has not recorded yet.
    """
    return math.fsum(
        max(0.0, r.amount_usd - recorded.get(r.id, 0.0))
        for r in reservations
        if scope_matches(scope, r.suite, r.subject)
    )
