"""Baselines: which earlier run a new run is compared with (SPEC §7).

Exactly one baseline: the one given explicitly, else the pinned one, else the latest completed run
of the same suite and subject (and variant, when the run has one) that was not itself recorded as
`inconclusive_noise`. Pins are append-only records; unpinning appends, never deletes.

Layout: `baselines/<suite>/<kind>/<id>/<variant or _>/<timestamp>-<uuid>.json` (PinRecord).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal
from uuid import uuid4

from pydantic import BaseModel

from assay.errors import InputError, NotFoundError
from assay.runs.records import (
    RunAggregate,
    RunStatus,
    load_aggregate,
    load_result,
    now,
    resolve_run_id,
    runs_of_subject,
)
from assay.store import EvidenceStore
from assay.subject import Subject


class BaselineSource(StrEnum):
    """Why a run was chosen as the baseline."""

    EXPLICIT = "explicit"
    PINNED = "pinned"
    AUTOMATIC = "automatic"


class PinRecord(BaseModel):
    """One pin or unpin, as recorded (append-only)."""

    action: Literal["pin", "unpin"]
    suite: str
    subject: str
    run_id: str | None
    at: datetime


def _pin_folder(suite: str, subject: Subject) -> str:
    return f"baselines/{suite}/{subject.kind}/{subject.id}/{subject.variant or '_'}/"


def _subject_of(run: RunAggregate) -> Subject:
    return Subject(kind=run.subject_kind, id=run.subject_id, variant=run.variant)


def pin(store: EvidenceStore, run_id: str) -> PinRecord:
    """Pin a completed run (its id or a unique prefix) as the baseline of its suite and
    subject."""
    run = load_aggregate(store, resolve_run_id(store, run_id))
    if run.status is not RunStatus.COMPLETED:
        raise InputError(
            run_id, f"only a completed run can be a baseline (this one is {run.status})"
        )
    subject = _subject_of(run)
    record = PinRecord(
        action="pin", suite=run.suite, subject=str(subject), run_id=run.run_id, at=now()
    )
    _append(store, run.suite, subject, record)
    return record


def unpin(store: EvidenceStore, suite: str, subject: Subject) -> PinRecord:
    """Remove the pin of a suite and subject (recorded as an `unpin`)."""
    record = PinRecord(action="unpin", suite=suite, subject=str(subject), run_id=None, at=now())
    _append(store, suite, subject, record)
    return record


def _append(store: EvidenceStore, suite: str, subject: Subject, record: PinRecord) -> None:
    key = f"{_pin_folder(suite, subject)}{record.at:%Y%m%dT%H%M%S%fZ}-{uuid4().hex[:8]}.json"
    store.put_once(key, record.model_dump_json().encode())


def pinned(store: EvidenceStore, suite: str, subject: Subject) -> str | None:
    """The pinned baseline run id, or None (never pinned, or unpinned since)."""
    keys = list(store.list(_pin_folder(suite, subject)))
    if not keys:
        return None
    latest = PinRecord.model_validate_json(store.get(keys[-1]))
    return latest.run_id if latest.action == "pin" else None


def _was_noise(store: EvidenceStore, run_id: str) -> bool:
    try:
        regression = load_result(store, run_id).regression
    except NotFoundError:
        return False
    return regression is not None and regression.status == "inconclusive_noise"


def automatic(store: EvidenceStore, candidate: RunAggregate) -> str | None:
    """Latest earlier completed run of the same suite and subject (and variant, when the
    candidate has one) not recorded as `inconclusive_noise`."""
    for run in runs_of_subject(store, candidate):  # newest first
        if (
            run.run_id == candidate.run_id
            or run.status is not RunStatus.COMPLETED
            or run.started_at >= candidate.started_at
            or run.suite != candidate.suite
            or (run.subject_kind, run.subject_id) != (candidate.subject_kind, candidate.subject_id)
            or (candidate.variant is not None and run.variant != candidate.variant)
        ):
            continue
        if not _was_noise(store, run.run_id):
            return run.run_id
    return None


def named_baseline(
    store: EvidenceStore, given: str, suite: str, *, cross_suite: bool = False
) -> str:
    """The run `given` (an id or a unique prefix) names as the baseline of a run of `suite`.

    Raises:
        NotFoundError: No such run.
        InputError: It is a run of another suite and `cross_suite` was not asked for — the
            comparison would mostly read as noise, silently turning regression detection
            off — or it did not complete.
    """
    run_id = resolve_run_id(store, given)
    baseline = load_aggregate(store, run_id)
    if baseline.suite != suite and not cross_suite:
        raise InputError(
            run_id,
            f"the baseline is a run of suite {baseline.suite}, not {suite}: runs of different "
            "suites are compared only with --cross-suite (`cross_suite` in a request)",
        )
    if baseline.status is not RunStatus.COMPLETED:
        raise InputError(run_id, f"the baseline run is {baseline.status}, not completed")
    return run_id


def select_baseline(
    store: EvidenceStore,
    candidate: RunAggregate,
    explicit: str | None,
    *,
    cross_suite: bool = False,
) -> tuple[str, BaselineSource] | None:
    """The run to compare `candidate` with, and why; None when there is none. Only an explicit
    baseline may be of another suite, and only when `cross_suite` says so."""
    if explicit:
        named = named_baseline(store, explicit, candidate.suite, cross_suite=cross_suite)
        return named, BaselineSource.EXPLICIT
    pinned_run = pinned(store, candidate.suite, _subject_of(candidate))
    if pinned_run is not None and pinned_run != candidate.run_id:
        return pinned_run, BaselineSource.PINNED
    found = automatic(store, candidate)
    return None if found is None else (found, BaselineSource.AUTOMATIC)
