"""Flow runs started in the calling process — `assay` commands and `assay serve` — rather than
by a worker from a deployment.

Such a run lives and ends with its process, and Assay's run records already tell a live run from
a dead one (`assay.runs.lifecycle`: the owner's pid on this host, else its heartbeat in the run
aggregate). So Prefect's own flow-run heartbeat is off for these runs: it emits one event per
180 s, and Prefect joins its thread at the end of every flow run, waiting out the thread's
1-second sleep — 0.5 to 0.8 s of a 4 s warm run on a lasting server (bench/README.md). Deployment
runs that workers start keep Prefect's default.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, temporary_settings

from tasks.evidence import crash_flow_run

__all__ = ["crash_flow_run", "in_this_process"]


@contextmanager
def in_this_process() -> Iterator[None]:
    """Settings for the flow runs started inside this block (in this thread)."""
    with temporary_settings(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}):
        yield
