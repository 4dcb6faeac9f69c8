"""Run lifecycle: who may start or resume a run, and when a `running` run is known to be gone.

Rules (docs/reliability.md):
- `--resume RUN` needs a recorded run: an unknown id is a `NotFoundError`, never a new run.
- A resume must match the recorded plan (suite and version, subject, outputs, sample and seed,
  case count and chunk layout) and index the same outputs (`RunPlan.outputs_digest`: the bytes,
  S3 objects and case ids each chunk was pinned to); otherwise it is refused *before anything
  is written*, so the recorded run — completed or not — is left exactly as it was.
- Resuming a completed run changes nothing: its EvalResult stands and is returned.
- A `running` run is **stale** when the process that ran it is gone: on the same host, its pid
  no longer exists (or is a zombie); on another host, its aggregate has had no heartbeat (it is
  rewritten after every chunk) for `ASSAY_RUN_STALE_SECONDS` (default 900). A stale run is
  shown `interrupted` by `assay runs list|show` (which write nothing), and the resume that takes
  it over marks the killed attempt's Prefect flow run Crashed. A run of inline outputs
  (`assay serve`, staged in the killed process's memory and never kept) cannot be resumed: it
  says to submit it again. A run still live in another process is not resumed under it (two
  writers of one run); a record without an owner (written before owners were recorded) is
  resumable, as it always was. `assay serve` shows runs by the same rule (`gone_reason`, also
  for the process that accepted a run not started yet; `assay/api/runner.py`).
"""

from __future__ import annotations

import os
import socket
from datetime import datetime
from pathlib import Path
from typing import Final

from assay import schemes
from assay.errors import InputError, NotFoundError, shown
from assay.hashing import store_secret
from assay.runs.records import (
    RunAggregate,
    RunOwner,
    RunPlan,
    RunStatus,
    load_aggregate,
    now,
    resolve_run_id,
    start_run,
)
from assay.store import EvidenceStore

STALE_ENV: Final = "ASSAY_RUN_STALE_SECONDS"
DEFAULT_STALE_SECONDS: Final = 900.0
_PLAN_FIELDS: Final = (
    "suite",
    "suite_version",
    "subject_kind",
    "subject_id",
    "variant",
    "outputs",
    "sample",
    "seed",
    "cases",
    "chunks",
)
"""What a resume must repeat exactly: anything else would score other evidence under the run."""


def this_process(flow_run: str | None = None) -> RunOwner:
    """The owner record of the current process (and its Prefect flow run, if any)."""
    return RunOwner(host=socket.gethostname(), pid=os.getpid(), flow_run=flow_run)


def _stale_seconds() -> float:
    raw = os.environ.get(STALE_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_STALE_SECONDS
    except ValueError:
        raise ValueError(f"{STALE_ENV} must be a positive number, not {raw!r}") from None
    if not value > 0:
        raise ValueError(f"{STALE_ENV} must be a positive number, not {raw!r}")
    return value


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False  # someone else's live process
    try:  # a killed child its parent has not reaped yet still answers signal 0
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


def gone_reason(
    owner: RunOwner | None, heard_at: datetime, at: datetime | None = None
) -> str | None:
    """Why the process `owner` names, last heard from at `heard_at`, is known to be gone
    (module docstring: its pid on this host, else its silence); None while it may be live.
    `assay serve` asks it of the process that accepted a run still queued."""
    if owner is not None and owner.host == socket.gethostname():
        if owner.pid != os.getpid() and _process_gone(owner.pid):
            return f"its process {owner.pid} on {owner.host} is gone"
        return None
    silent = ((at or now()) - heard_at).total_seconds()
    limit = _stale_seconds()
    if silent > limit:
        return f"no heartbeat for {silent:.0f}s (limit {limit:.0f}s, {STALE_ENV})"
    return None


def stale_reason(aggregate: RunAggregate, at: datetime | None = None) -> str | None:
    """Why a `running` run's process is known to be gone (module docstring); None otherwise."""
    if aggregate.status is not RunStatus.RUNNING:
        return None
    return gone_reason(aggregate.owner, aggregate.updated_at, at)


def settled(aggregate: RunAggregate) -> RunAggregate:
    """A run as reads show it: a stale `running` run as `interrupted` (a copy; nothing is
    written, since reading commands never write to the store), any other run as recorded."""
    reason = stale_reason(aggregate)
    if reason is None:
        return aggregate
    advice = (
        "its inline outputs were not kept: submit the run again"
        if schemes.is_inline(aggregate.outputs)
        else f"continue it with --resume {aggregate.run_id}"
    )
    return aggregate.model_copy(
        update={"status": RunStatus.INTERRUPTED, "error": f"{reason}; {advice}"}
    )


def _refusal(recorded: RunAggregate, plan: RunPlan) -> str | None:
    differ = [
        f"{name} {shown(getattr(recorded, name))} (this resume: {shown(getattr(plan, name))})"
        for name in _PLAN_FIELDS
        if getattr(recorded, name) != getattr(plan, name)
    ]
    pinned = recorded.outputs_digest
    if not differ and pinned is not None and pinned != plan.outputs_digest:
        differ.append(
            f"outputs {shown(recorded.outputs)} holding other content (the outputs changed "
            "since the run began)"
        )
    if not differ:
        return None
    return f"run {recorded.run_id} was recorded with " + "; ".join(differ)


def recorded_for_resume(store: EvidenceStore, run_id: str) -> RunAggregate:
    """The recorded run a `--resume` names (the CLI asks before any Prefect API starts).

    Raises:
        NotFoundError: the store holds no run with that id.
    """
    try:
        return load_aggregate(store, run_id)
    except NotFoundError:
        raise NotFoundError(
            f"no run {shown(run_id)} to resume in {store.uri} (see `assay runs list`)"
        ) from None


def resumed_run_id(store: EvidenceStore, given: str) -> str:
    """The whole id of the recorded run a `--resume` names by its id or a unique prefix, as
    every command names a run (`resolve_run_id`); the launcher resumes it under that id.

    Raises:
        NotFoundError: no run has that id or prefix.
        InputError: the prefix is too short or names several runs.
    """
    try:
        run_id = resolve_run_id(store, given)
    except NotFoundError:
        raise NotFoundError(
            f"no run {shown(given)} to resume in {store.uri} (see `assay runs list`)"
        ) from None
    return recorded_for_resume(store, run_id).run_id


def begin_run(
    store: EvidenceStore, plan: RunPlan, owner: RunOwner, *, resuming: bool
) -> RunAggregate:
    """Start a new run, or resume a recorded one, under the rules of the module docstring.

    Returns the running aggregate, or the untouched aggregate of a completed run (nothing to do).

    Raises:
        NotFoundError: `resuming` a run id the store does not hold.
        InputError: the resume does not match the recorded run, or that run is still live.
    """
    # The output-hash secret exists before any chunk runs: parallel chunks on a store without
    # conditional writes would otherwise each create (and hash under) a secret of their own.
    store_secret(store)
    if resuming:
        recorded = recorded_for_resume(store, plan.run_id)
    else:
        try:
            recorded = load_aggregate(store, plan.run_id)
        except NotFoundError:
            return start_run(store, plan, owner)
    refusal = _refusal(recorded, plan)
    if refusal is not None:
        raise InputError("--resume", f"{refusal}; nothing was changed")
    if recorded.status is RunStatus.COMPLETED:
        return recorded
    other = recorded.owner
    elsewhere = other is not None and (other.host, other.pid) != (owner.host, owner.pid)
    live = recorded.status is RunStatus.RUNNING and stale_reason(recorded) is None
    if other is not None and elsewhere and live:
        raise InputError(
            "--resume",
            f"run {recorded.run_id} is still running in process {other.pid} on {other.host} "
            f"(last heartbeat {recorded.updated_at:%Y-%m-%d %H:%M:%S} UTC); resume it once "
            "it has stopped",
        )
    return start_run(store, plan, owner)
