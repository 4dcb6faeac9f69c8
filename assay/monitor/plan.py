"""The monitoring plan: when the confidence sequences start, against which baseline, on which
signal, with which margin — fixed before monitoring starts and recorded once.

A margin chosen after looking at the data is no margin: the first monitor run that uses a plan
writes it to `monitor/plans/<start>-<digest>.json` (write-once), and a later run that names the
same start and baseline with another margin, signal or alpha is refused.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from assay.errors import InputError, NotFoundError
from assay.monitor.signals import checked_subject
from assay.store import EvidenceStore
from assay.store.write_once import write_once

PLAN_PREFIX: Final = "monitor/plans/"

Signal = Literal["completion", "failure", "high_severity"]

SIGNALS: Final[tuple[Signal, ...]] = ("completion", "failure", "high_severity")

HIGHER_IS_BETTER: Final[dict[Signal, bool]] = {
    "completion": True,
    "failure": False,
    "high_severity": False,
}


class SequencePlan(BaseModel):
    """Pre-registered settings of the monitor's confidence sequences."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    since: AwareDatetime = Field(
        description="Start of the sequences: every session that ended at or after it counts, "
        "in the order it ended. Fixed for the life of the plan."
    )
    baseline: str | None = Field(
        default=None,
        description="Subject (`KIND:ID[@VARIANT]`) every other subject is paired against; "
        "without one, no subject gets a state.",
    )
    signal: Signal = Field(
        default="completion", description="The rate the paired sequence and the state are on."
    )
    margin: float = Field(
        default=0.05,
        ge=0,
        lt=1,
        description="How much worse than the baseline still counts as holding (0.05 = five "
        "percentage points).",
    )
    alpha: float = Field(
        default=0.05,
        gt=0,
        le=0.2,
        description="Chance that a sequence ever misses its mean, over the life of the plan.",
    )

    @field_validator("baseline")
    @classmethod
    def _baseline_subject(cls, value: str | None) -> str | None:
        return None if value is None else checked_subject(value)

    @property
    def key(self) -> str:
        """Where the plan is recorded: one per start and baseline."""
        digest = hashlib.sha256(f"{self.since.isoformat()}|{self.baseline}".encode()).hexdigest()
        return f"{PLAN_PREFIX}{self.since.astimezone(UTC):%Y%m%dT%H%M%SZ}-{digest[:12]}.json"


class RegisteredPlan(BaseModel):
    """A plan as first recorded, and when."""

    plan: SequencePlan
    registered_at: AwareDatetime
    """Wall-clock time of the first monitor run that used it."""
    registered_by: str
    """That run's report id."""


def registered_plan(store: EvidenceStore, plan: SequencePlan) -> RegisteredPlan | None:
    """The plan recorded for this start and baseline, if any; raises InputError when it differs
    from `plan` (the margin, signal and alpha cannot change once monitoring has started)."""
    try:
        recorded = RegisteredPlan.model_validate_json(store.get(plan.key))
    except NotFoundError:
        return None
    _same(recorded, plan)
    return recorded


def register_plan(store: EvidenceStore, plan: SequencePlan, report_id: str) -> RegisteredPlan:
    """Record the plan once; return what is recorded (the first registration wins)."""
    first = registered_plan(store, plan)
    if first is not None:
        return first
    recorded = write_once(
        store,
        plan.key,
        RegisteredPlan(plan=plan, registered_at=datetime.now(UTC), registered_by=report_id),
    )
    _same(recorded, plan)
    return recorded


def _same(recorded: RegisteredPlan, plan: SequencePlan) -> None:
    changed = [
        name
        for name in ("signal", "margin", "alpha")
        if getattr(recorded.plan, name) != getattr(plan, name)
    ]
    if changed:
        name = changed[0]
        raise InputError(
            "monitoring plan",
            f"the plan starting {plan.since:%Y-%m-%d %H:%M} UTC was registered on "
            f"{recorded.registered_at:%Y-%m-%d %H:%M} UTC with {name} "
            f"{getattr(recorded.plan, name)}; a pre-registered plan cannot change once "
            "monitoring has started (start a new one with a later --since)",
            field=name,
        )
