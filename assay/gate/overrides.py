"""Governed overrides of failed gates, and their audit trail (SPEC §10).

The gate's recorded decision (`assay.gate.decision`) never changes. The only way past a failed
gate is an override: an admin's token and a written reason of at least 20 characters. A granted
override changes the run's *effective* verdict to `pass`, which is what `assay gate --check`
re-checks.

Every attempt by a known principal, granted or refused, appends one write-once audit record
under `audit/<run_id>/<timestamp>-<random>.json`; nothing is ever overwritten or deleted. An
attempt is refused, in this order of checks, when: the token is missing or unknown; the caller is
not an admin; the reason is too short; the run has no recorded gate decision; the recorded verdict
is already `pass`; or the run was already overridden. A refused attempt by a principal is audited
under the run id it named, even when no such run exists, so probing is visible too. A caller
without a valid token writes nothing at all: the store is not a log anyone may fill. A run id
that cannot name a store folder (empty, only dots, or with `/` or whitespace) and a reason longer
than `MAX_REASON` characters are usage errors, not attempts: nothing is written, so an audit
record's reason is never longer than `MAX_REASON`.

Tokens are never stored: a record names the principal and its tier.
"""

from __future__ import annotations

import re
from contextlib import suppress
from datetime import datetime
from typing import Final, Literal
from uuid import uuid4

from pydantic import BaseModel, Field

from assay.errors import InputError, NotFoundError, shown
from assay.gate.access import Principal, Tier, identify
from assay.gate.decision import GateDecision, GateReason, GateVerdict, load_decision
from assay.identifiers import MIN_RUN_ID_PREFIX
from assay.runs.records import now as utc_now
from assay.runs.records import resolve_run_id
from assay.store import EvidenceStore

MIN_REASON: Final = 20
"""The fewest characters (after stripping) an override reason may have."""

MAX_REASON: Final = 2000
"""The most characters an override reason may have: a longer one is bad input (422, CLI exit 2)
and nothing is written, so an audit record stays small whoever sends it."""

UNKNOWN: Final = "unknown"
"""The principal of a refused attempt whose token matched no principal (never audited)."""

_PREFIX: Final = "audit/"
_RUN_ID: Final = re.compile(r"^[^/\s]*[^/\s.][^/\s]*$")

OverrideOutcome = Literal["granted", "refused"]


class OverrideRecord(BaseModel):
    """One override attempt, as audited (write-once).

    Attributes:
        run_id: The run the attempt named.
        principal: The caller's name, or `unknown` for a missing or unknown token.
        tier: The caller's tier; None when unknown.
        reason: The written reason, stripped.
        at: When the attempt was made (UTC).
        recorded_verdict: The gate's recorded verdict; None when the run has no gate decision.
        effective_verdict: The effective verdict after this attempt (unchanged when refused).
        outcome: `granted` or `refused`.
        refusal: Why the attempt was refused; None when granted.
    """

    run_id: str = Field(pattern=_RUN_ID.pattern)
    principal: str
    tier: Tier | None
    reason: str
    at: datetime
    recorded_verdict: GateVerdict | None
    effective_verdict: GateVerdict | None
    outcome: OverrideOutcome
    refusal: str | None

    @property
    def audited(self) -> bool:
        """Whether the attempt was written to the audit trail (callers without a valid token
        are refused without a write)."""
        return self.principal != UNKNOWN


class GateCheck(BaseModel):
    """A past gate run re-checked: what the gate recorded and what holds now.

    Attributes:
        run_id: The run.
        recorded: The gate's recorded verdict (never changes).
        effective: `pass` when the recorded verdict passed or an override was granted.
        overrides: How many overrides were granted for the run.
        override: The first granted override, which made the effective verdict `pass`.
        reasons: Why the gate failed (the recorded decision's reasons).
        warnings: The recorded decision's declared warnings.
    """

    run_id: str
    recorded: GateVerdict
    effective: GateVerdict
    overrides: int
    override: OverrideRecord | None
    reasons: list[GateReason]
    warnings: list[str]


def _folder(run_id: str) -> str:
    """The audit folder of a run; InputError when the run id cannot name one."""
    if _RUN_ID.fullmatch(run_id) is None:
        raise InputError(
            "run_id", f"{shown(run_id)}: a run id has no `/` or whitespace and is not only dots"
        )
    return f"{_PREFIX}{run_id}/"


def audit_records(store: EvidenceStore, run_id: str | None = None) -> list[OverrideRecord]:
    """Audited override attempts, for one run or all, oldest first (newest last)."""
    prefix = _folder(run_id) if run_id is not None else _PREFIX
    records = [OverrideRecord.model_validate_json(store.get(key)) for key in store.list(prefix)]
    return sorted(records, key=lambda record: record.at)


def _granted(records: list[OverrideRecord]) -> list[OverrideRecord]:
    return [record for record in records if record.outcome == "granted"]


def _effective(decision: GateDecision, granted: list[OverrideRecord]) -> GateVerdict:
    return "pass" if granted else decision.verdict


def gate_run_id(store: EvidenceStore, given: str) -> str:
    """The run `given` names in the gate's records: itself when the gate decided it, else the
    recorded run it is a unique prefix of (`resolve_run_id`, as every command names a run),
    else itself — an id no run has is the caller's to be told about (no gate decision, no
    audit records, a refused attempt audited all the same).

    Raises:
        InputError: `given` is a prefix of several runs (they are listed).
    """
    if len(given) < MIN_RUN_ID_PREFIX:
        return given
    with suppress(NotFoundError):
        return load_decision(store, given).run_id
    with suppress(NotFoundError):
        return resolve_run_id(store, given)
    return given


def check_gate(store: EvidenceStore, run_id: str) -> GateCheck:
    """Re-check a past gate run (its id or a unique prefix); NotFoundError when the gate never
    decided it, InputError when the prefix names several runs."""
    run_id = gate_run_id(store, run_id)
    decision = load_decision(store, run_id)
    granted = _granted(audit_records(store, run_id))
    return GateCheck(
        run_id=run_id,
        recorded=decision.verdict,
        effective=_effective(decision, granted),
        overrides=len(granted),
        override=granted[0] if granted else None,
        reasons=decision.reasons,
        warnings=decision.warnings,
    )


def _refusal(
    caller: Principal | None,
    token: str | None,
    reason: str,
    decision: GateDecision | None,
    granted: list[OverrideRecord],
) -> str | None:
    """Why an attempt must be refused, or None when it may be granted."""
    if caller is None:
        return "no token: set ASSAY_TOKEN" if not token else "unknown or rotated-out token"
    if caller.tier is not Tier.ADMIN:
        return f"overrides need the admin tier; {caller.name} is {caller.tier}"
    if len(reason) < MIN_REASON:
        return f"the reason has {len(reason)} characters; at least {MIN_REASON} are required"
    if decision is None:
        return "the run has no recorded gate decision"
    if decision.verdict == "pass":
        return "the recorded verdict is already pass; there is nothing to override"
    if granted:
        first = granted[0]
        return f"already overridden by {first.principal} at {first.at:%Y-%m-%d %H:%M:%S} UTC"
    return None


def request_override(
    store: EvidenceStore,
    run_id: str,
    token: str | None,
    reason: str,
    now: datetime | None = None,
) -> OverrideRecord:
    """Attempt to override a run's failed gate; a known caller's attempt is audited whatever
    its outcome, an unknown caller's is refused without a write.

    Args:
        store: The evidence store holding gate decisions, principals and the audit trail.
        run_id: The gate run to override (its id or a unique prefix).
        token: The caller's token (`ASSAY_TOKEN`); None when not set.
        reason: Why the failure is a false alarm (at least 20 characters after stripping, at
            most `MAX_REASON`).
        now: The attempt time (default: now, UTC).

    Returns:
        The attempt (written to the audit trail when `audited`); `outcome` says whether the
        override was granted.

    Raises:
        InputError: The run id cannot name a store folder, or is a prefix of several runs, or
            the reason is longer than `MAX_REASON` characters (nothing is written).
    """
    folder = _folder(run_id)
    reason = reason.strip()
    if len(reason) > MAX_REASON:
        raise InputError(
            "reason", f"the reason has {len(reason):,} characters; at most {MAX_REASON} are allowed"
        )
    caller = identify(store, token)
    decision: GateDecision | None = None
    if caller is not None:  # an unknown caller learns nothing about the run
        run_id = gate_run_id(store, run_id)
        folder = _folder(run_id)
        with suppress(NotFoundError):
            decision = load_decision(store, run_id)
    granted = _granted(audit_records(store, run_id)) if decision is not None else []
    refusal = _refusal(caller, token, reason, decision, granted)
    before = None if decision is None else _effective(decision, granted)
    record = OverrideRecord(
        run_id=run_id,
        principal=caller.name if caller else UNKNOWN,
        tier=caller.tier if caller else None,
        reason=reason,
        at=now or utc_now(),
        recorded_verdict=None if decision is None else decision.verdict,
        effective_verdict=before if refusal else "pass",
        outcome="refused" if refusal else "granted",
        refusal=refusal,
    )
    if record.audited:
        key = f"{folder}{record.at:%Y%m%dT%H%M%S%fZ}-{uuid4().hex[:8]}.json"
        store.put_once(key, record.model_dump_json().encode())
    return record
