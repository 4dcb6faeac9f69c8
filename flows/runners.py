"""Where a suite run's score-chunk tasks run: a thread pool here, or a Dask cluster.

A cluster is named by a *Dask reference*: a scheduler address (`tcp://10.0.0.5:8786`), or
`block:NAME` for a saved DaskCluster block. A run's options name it (`dask`, or `workers` for a
temporary local cluster); `ASSAY_DASK_ADDRESS` holds one for runs whose options name none, read
where the flow runs. The `suite-run` flow opens the runner in its body, so a deployment's run
and a launched one honour the same options.

Dask workers run score-chunk in their own processes and report the task runs to the Prefect API
themselves: they need the API's address, and the evidence store and outputs must be reachable
from them (an S3 store and `s3://` outputs across machines).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner

from assay.dask_reference import BLOCK_PREFIX, check_reference
from assay.errors import InputError

DASK_ADDRESS_ENV = "ASSAY_DASK_ADDRESS"
LOCAL_THREADS = 4
"""Chunks in flight at once on the default runner: judge-bound chunks overlap their calls;
scoring itself holds the GIL, so more threads would only hold more chunks in memory."""
PROBE_SECONDS = 10


def ensure_reachable(address: str) -> None:
    """Raise an InputError naming `address` unless a Dask scheduler answers there."""
    from distributed import Client

    try:
        with Client(address, timeout=PROBE_SECONDS, set_as_default=False):  # type: ignore[no-untyped-call]
            pass
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(
            address, f"no Dask scheduler answered within {PROBE_SECONDS} s ({type(exc).__name__})"
        ) from None


def chunk_runner(dask: str | None = None, workers: int | None = None) -> TaskRunner[Any]:
    """The task runner for score-chunk tasks.

    `dask` connects to an existing scheduler; `workers` starts a temporary LocalCluster of that
    many single-threaded worker processes (`RunOptions` takes one or the other, within its
    bounds); neither: the scheduler `ASSAY_DASK_ADDRESS` names, else a pool of `LOCAL_THREADS`
    threads in this process.
    """
    reference = dask or (None if workers else os.environ.get(DASK_ADDRESS_ENV))
    if reference:
        check_reference(reference)
    if not reference and not workers:
        return ThreadPoolTaskRunner(max_workers=LOCAL_THREADS)
    from prefect_dask.task_runners import DaskTaskRunner

    if reference and reference.startswith(BLOCK_PREFIX):
        from blocks import DaskCluster

        block = cast(DaskCluster, DaskCluster.load(reference.removeprefix(BLOCK_PREFIX)))
        return block.task_runner()
    if reference:
        return DaskTaskRunner(address=reference)
    return DaskTaskRunner(
        cluster_kwargs={
            "n_workers": workers,
            "threads_per_worker": 1,
            "processes": True,
            "dashboard_address": None,
        }
    )


def reachable_chunk_runner(dask: str | None, workers: int | None) -> TaskRunner[Any]:
    """`chunk_runner`, after checking that the cluster it connects to answers."""
    runner = chunk_runner(dask, workers)
    address = getattr(runner, "address", None)  # set on a DaskTaskRunner for an existing cluster
    if address:
        ensure_reachable(address)
    return runner


@contextmanager
def api_for_workers(runner: TaskRunner[Any]) -> Iterator[None]:
    """Give Dask workers an API to report to when this process would use an ephemeral one.

    The ephemeral API lives inside this process tree and has no URL in the settings, so a worker
    process would start an API of its own; start it here and put its URL in the settings that
    every submitted task carries to its worker.
    """
    from prefect.settings import PREFECT_API_URL, temporary_settings

    if isinstance(runner, ThreadPoolTaskRunner) or PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()
    server.start()
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield
