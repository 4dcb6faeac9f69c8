"""Access: principals, their tiers and their tokens (SPEC §10, §15).

A principal is a named caller with one tier: viewer < operator < admin. Adding one generates a
random token (`assay_` + 32 random bytes, URL-safe), returns it once and stores only its SHA-256
hash: a 256-bit random token cannot be guessed from its hash, so no salt or secret key is needed,
and a leaked store leaks no usable token. The caller's token (`ASSAY_TOKEN`) is hashed and
compared with every principal's hash in constant time.

Records are write-once and append-only: every change after the bootstrap is the next entry of
one numbered log, `access/changes/<n>.json` (PrincipalRecord), claimed with a conditional write
(`put_once_if_absent`). A change is checked against the state the log held when it was read; if
another change took that number meanwhile, the state is read again and the change re-checked, so
changes are serialized: of two admins demoting themselves at once, the second is re-checked
against the first's demotion and refused as the last admin. (Stores written before the log kept
`access/principals/<name>/<timestamp>-<random>.json`; those are still read, before the log.)
Re-adding a name is refused unless it is a rotation, which appends a new record (a new token, and
possibly a new tier); the latest record of a name wins, so the old token stops working at once.

Who may change access: while the store has no principal at all, anyone may add the first one, and
it must be an admin (bootstrap); from then on every add or rotation needs an admin's token, and
the last admin cannot be demoted (that would leave no one able to grant access or override).

The bootstrap is write-once: the first admin's record is written to `access/bootstrap.json` with
a conditional write, so of two concurrent first adds exactly one wins and the other is refused
(it was two admins before). Every refused add or rotation (a valid name, refused for any reason)
appends a write-once `AccessAttempt` under `access/audit/`, as refused overrides are audited;
`assay access audit` lists them. Tokens are never in an audit record.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from enum import StrEnum
from typing import Final, Literal
from uuid import uuid4

from pydantic import BaseModel, Field

from assay.errors import AssayError, InputError, NotFoundError
from assay.runs.records import now as utc_now
from assay.store import EvidenceStore

TOKEN_PREFIX: Final = "assay_"
"""Every token starts with this, so secret scanners and people can recognise one."""

BOOTSTRAP: Final = "bootstrap"
"""`added_by` of the first principal, added while the store had none."""

_PREFIX: Final = "access/principals/"
_CHANGES: Final = "access/changes/"
_CHANGE_ATTEMPTS: Final = 16
"""How many times a change is re-read and re-checked when concurrent changes take its number."""
_BOOTSTRAP_KEY: Final = "access/bootstrap.json"
_AUDIT_PREFIX: Final = "access/audit/"
UNKNOWN_CALLER: Final = "unknown"
"""The caller of an audited attempt whose token matched no principal (or that gave none)."""
_NAME: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


class Tier(StrEnum):
    """What a principal may do; each tier may do everything the tiers below it may."""

    VIEWER = "viewer"
    OPERATOR = "operator"
    ADMIN = "admin"

    @property
    def rank(self) -> int:
        """Position in viewer < operator < admin."""
        return list(Tier).index(self)

    def at_least(self, other: Tier) -> bool:
        """Whether this tier includes `other`'s rights."""
        return self.rank >= other.rank


class AccessDeniedError(AssayError):
    """The caller's token does not grant what was asked (missing, unknown or too low a tier)."""


class PrincipalRecord(BaseModel):
    """One add or rotation of a principal, as stored (write-once). Holds the token's hash only."""

    name: str = Field(pattern=_NAME.pattern)
    tier: Tier
    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    action: Literal["add", "rotate"]
    added_by: str
    """The admin who made the change, or `bootstrap` for the store's first principal."""
    at: datetime


class Principal(BaseModel):
    """A principal as callers see it: name and tier, never the token or its hash."""

    name: str
    tier: Tier
    since: datetime
    """When the current record (and token) was made."""
    added_by: str


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _latest_records(store: EvidenceStore) -> dict[str, PrincipalRecord]:
    """The current record of every principal, by name."""
    return _access_state(store)[0]


def _access_state(store: EvidenceStore) -> tuple[dict[str, PrincipalRecord], int]:
    """The current record of every principal, by name, and the number of the log's last entry.

    The bootstrap record comes first, then the legacy per-name records (keys list in
    lexicographic order and sort by time within a name), then the log in order: the last wins.
    """
    records: dict[str, PrincipalRecord] = {}
    try:
        first = PrincipalRecord.model_validate_json(store.get(_BOOTSTRAP_KEY))
    except NotFoundError:
        pass
    else:
        records[first.name] = first
    latest: dict[str, str] = {}
    for key in store.list(_PREFIX):
        latest[key.removeprefix(_PREFIX).split("/", 1)[0]] = key
    records.update(
        (name, PrincipalRecord.model_validate_json(store.get(key))) for name, key in latest.items()
    )
    last = 0
    for key in store.list(_CHANGES):
        record = PrincipalRecord.model_validate_json(store.get(key))
        records[record.name] = record
        last = int(key.removeprefix(_CHANGES).removesuffix(".json"))
    return records, last


def _public(record: PrincipalRecord) -> Principal:
    return Principal(name=record.name, tier=record.tier, since=record.at, added_by=record.added_by)


def principals(store: EvidenceStore) -> list[Principal]:
    """Every principal with its current tier, by name."""
    return [_public(record) for _, record in sorted(_latest_records(store).items())]


def _match(records: dict[str, PrincipalRecord], token: str) -> PrincipalRecord | None:
    digest = _hash(token)
    found = None
    # Compare with every record, not just until a match, so timing does not tell which matched.
    for record in records.values():
        if hmac.compare_digest(digest, record.token_sha256):
            found = record
    return found


def identify(store: EvidenceStore, token: str | None) -> Principal | None:
    """The principal a token belongs to; None for a missing, unknown or rotated-out token."""
    if not token:
        return None
    record = _match(_latest_records(store), token)
    return None if record is None else _public(record)


def _authorise(records: dict[str, PrincipalRecord], token: str | None, tier: Tier) -> str:
    """Who is changing access: `bootstrap` for the first principal, else an admin's name."""
    if not records:
        if tier is not Tier.ADMIN:
            raise InputError(
                "access", "the first principal of a store must be an admin (bootstrap)"
            )
        return BOOTSTRAP
    caller = _match(records, token) if token else None
    if caller is None:
        raise AccessDeniedError("changing access needs an admin's token in ASSAY_TOKEN")
    if caller.tier is not Tier.ADMIN:
        raise AccessDeniedError(
            f"changing access needs the admin tier; {caller.name} is {caller.tier}"
        )
    return caller.name


def add_principal(
    store: EvidenceStore,
    name: str,
    tier: Tier,
    *,
    by_token: str | None = None,
    rotate: bool = False,
    now: datetime | None = None,
) -> str:
    """Add a principal (or rotate its token) and return the new token — the only time it exists.

    Args:
        store: The evidence store holding access records.
        name: The principal's name (letters, digits, `.`, `_`, `@`, `-`; at most 64).
        tier: The tier it gets (with `rotate`, its new tier).
        by_token: The caller's token; must be an admin's unless the store has no principal yet.
        rotate: Replace an existing principal's token (and tier); the old token stops working.
        now: The record time (default: now, UTC).

    Raises:
        AccessDeniedError: The caller is not an admin (after bootstrap).
        InputError: Bad name; the name exists (without `rotate`) or does not (with it); the
            first principal is not an admin; or the change would leave the store without admin.
    """
    if _NAME.fullmatch(name) is None:
        raise InputError(name, "a principal name uses letters, digits, . _ @ - (at most 64)")
    at = now or utc_now()
    try:
        return _add(store, name, tier, by_token, rotate, at)
    except (AccessDeniedError, InputError) as exc:
        _audit_refusal(store, name, tier, rotate, by_token, at, exc)
        raise


def _add(
    store: EvidenceStore,
    name: str,
    tier: Tier,
    by_token: str | None,
    rotate: bool,
    at: datetime,
) -> str:
    for _ in range(_CHANGE_ATTEMPTS):
        records, last = _access_state(store)
        token = _checked_change(store, records, last + 1, name, tier, by_token, rotate, at)
        if token is not None:
            return token
    raise AccessDeniedError(
        f"access changed concurrently {_CHANGE_ATTEMPTS} times while this change was checked; "
        "try again"
    )


def _checked_change(
    store: EvidenceStore,
    records: dict[str, PrincipalRecord],
    number: int,
    name: str,
    tier: Tier,
    by_token: str | None,
    rotate: bool,
    at: datetime,
) -> str | None:
    """Check the change against `records` and write it as log entry `number`; returns the new
    token, or None when another change took that number first (re-read and re-check)."""
    added_by = _authorise(records, by_token, tier)
    current = records.get(name)
    if current is None and rotate:
        raise InputError(name, "no such principal to rotate (add it without --rotate)")
    if current is not None and not rotate:
        raise InputError(name, "the principal exists; use --rotate to issue it a new token")
    admins = [r.name for r in records.values() if r.tier is Tier.ADMIN]
    if admins == [name] and tier is not Tier.ADMIN:
        raise InputError(name, "the last admin cannot be demoted; add another admin first")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    record = PrincipalRecord(
        name=name,
        tier=tier,
        token_sha256=_hash(token),
        action="rotate" if rotate else "add",
        added_by=added_by,
        at=at,
    )
    if added_by == BOOTSTRAP:
        if not store.put_once_if_absent(_BOOTSTRAP_KEY, record.model_dump_json().encode()):
            raise AccessDeniedError(
                "another first admin was added at the same time; ask that admin for access"
            )
        return token
    if not store.put_once_if_absent(
        f"{_CHANGES}{number:010d}.json", record.model_dump_json().encode()
    ):
        return None
    return token


class AccessAttempt(BaseModel):
    """One refused add or rotation, as audited (write-once). Never holds a token or its hash."""

    name: str
    tier: Tier
    action: Literal["add", "rotate"]
    caller: str
    """The caller's principal name, or `unknown`."""
    refusal: str
    at: datetime


def _audit_refusal(
    store: EvidenceStore,
    name: str,
    tier: Tier,
    rotate: bool,
    by_token: str | None,
    at: datetime,
    refusal: Exception,
) -> None:
    caller = identify(store, by_token)
    attempt = AccessAttempt(
        name=name,
        tier=tier,
        action="rotate" if rotate else "add",
        caller=UNKNOWN_CALLER if caller is None else caller.name,
        refusal=refusal.problem if isinstance(refusal, InputError) else str(refusal),
        at=at,
    )
    key = f"{_AUDIT_PREFIX}{at:%Y%m%dT%H%M%S%fZ}-{uuid4().hex[:8]}.json"
    store.put_once(key, attempt.model_dump_json().encode())


def access_attempts(store: EvidenceStore) -> list[AccessAttempt]:
    """Every audited refused access change, oldest first."""
    return [AccessAttempt.model_validate_json(store.get(key)) for key in store.list(_AUDIT_PREFIX)]
