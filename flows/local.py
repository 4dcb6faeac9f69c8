"""Flow runs started in the calling process — `assay` commands and `assay serve` — rather than
by a worker from a deployment.

Such a run lives and ends with its process, and Assay's run records already tell a live run from
a dead one (`assay.runs.lifecycle`: the owner's pid on this host, else its heartbeat in the run
aggregate). So Prefect's own flow-run heartbeat is off for these runs: it emits one event per
180 s, and Prefect joins its thread at the end of every flow run, waiting out the thread's
1-second sleep — 0.5 to 0.8 s of a 4 s warm run on a lasting server (bench/README.md). Deployment
runs that workers start keep Prefect's default. The settings without the heartbeat are built
once per settings in force (Prefect's `temporary_settings` rebuilds them on every entry: 30–60 ms
of a service's 10-case run).

Each thread also keeps one Prefect API client per settings for the runs it starts: Prefect builds
a client for every flow run that finds none, and each loads the CA bundle (15–35 ms of a
service's 10-case run, whose API is plain http on this host).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

from prefect.context import SettingsContext, SyncClientContext, get_settings_context
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, Settings

from tasks.evidence import crash_flow_run

__all__ = ["crash_flow_run", "in_this_process"]


_without_heartbeat: dict[int, tuple[Settings, Settings]] = {}
"""By `id` of the settings in force: those settings (kept, so the id stays theirs) and the same
without the heartbeat."""
_lock = threading.Lock()
_this_thread = threading.local()


@contextmanager
def in_this_process() -> Iterator[None]:
    """Settings for the flow runs started inside this block (in this thread)."""
    context = get_settings_context()
    current = context.settings
    with _lock:
        known = _without_heartbeat.get(id(current))
        if known is None or known[0] is not current:
            quiet = current.copy_with_update(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None})
            known = _without_heartbeat[id(current)] = (current, quiet)
            while len(_without_heartbeat) > 8:
                del _without_heartbeat[next(iter(_without_heartbeat))]
    with SettingsContext(profile=context.profile, settings=known[1]), _client_of_this_thread():
        yield


def _client_of_this_thread() -> AbstractContextManager[object]:
    """This thread's client context for the settings in force, made on first use (none when a
    client context is already active: the run uses that one). Its client is entered once more
    than the context enters it, so leaving the context after a run leaves the client open for
    the thread's next run; one context per thread, as Prefect contexts are entered by one thread
    at a time."""
    if SyncClientContext.get() is not None:
        return nullcontext()
    settings = get_settings_context().settings
    if not hasattr(_this_thread, "clients"):
        _this_thread.clients = {}
    clients: dict[int, tuple[Settings, SyncClientContext]] = _this_thread.clients
    known = clients.get(id(settings))
    if known is None or known[0] is not settings:
        context = SyncClientContext()
        context.client.__enter__()
        known = clients[id(settings)] = (settings, context)
        while len(clients) > 8:
            _, evicted = clients.pop(next(iter(clients)))
            evicted.client.__exit__()
    return known[1]
