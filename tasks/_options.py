"""Task options shared by every Assay task: one place for retry and persistence policy."""

from __future__ import annotations

from typing import Any

from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State, TaskRun
from prefect.tasks import Task

from assay.errors import AssayError


def _transient(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Retry I/O failures, never input or integrity errors (retrying cannot fix those)."""
    try:
        state.result()
    except AssayError:
        return False
    except Exception:
        return True
    return False


NO_PERSISTENCE: dict[str, Any] = {"persist_result": False, "cache_policy": NO_CACHE}
"""Nothing an Assay task returns is written to Prefect's result storage or cached."""

IO_RETRIES: dict[str, Any] = {
    **NO_PERSISTENCE,
    "retries": 3,
    "retry_delay_seconds": [1, 2, 4],
    "retry_jitter_factor": 0.5,
    "retry_condition_fn": _transient,
}
"""For tasks that talk to the evidence store or read outputs: bounded, jittered retries."""
