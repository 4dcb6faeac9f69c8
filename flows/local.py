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
service's 10-case run, whose API is plain http on this host). Against a Prefect server on this
host, that client asks again within milliseconds when the server's SQLite database was busy
(`_BusyRetry`), where Prefect's client would wait two seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Generic, TypeVar

import httpx
from prefect.context import SettingsContext, SyncClientContext, get_settings_context
from prefect.settings import PREFECT_FLOWS_HEARTBEAT_FREQUENCY, Settings

from assay.process_state import remembered
from tasks.evidence import crash_flow_run

__all__ = ["crash_flow_run", "in_this_process"]


T = TypeVar("T")
KEPT_SETTINGS = 8
"""How many settings objects a cache below keeps what it made for (a process rarely has more
than one or two: tests switch APIs)."""


class _PerSettings(Generic[T]):
    """What was made for each settings object in force, by its `id` (the settings are kept with
    it, so the id stays theirs); the oldest is dropped (and given to `dropped`) past
    `KEPT_SETTINGS`."""

    def __init__(self, make: Callable[[Settings], T], dropped: Callable[[T], None]) -> None:
        self._made: dict[int, tuple[Settings, T]] = {}
        self._make = make
        self._dropped = dropped

    def __call__(self, settings: Settings) -> T:
        known = self._made.get(id(settings))
        if known is None or known[0] is not settings:
            known = self._made[id(settings)] = (settings, self._make(settings))
            while len(self._made) > KEPT_SETTINGS:
                self._dropped(self._made.pop(next(iter(self._made)))[1])
        return known[1]

    def clear(self) -> None:
        """Forget everything made (each given to `dropped`)."""
        while self._made:
            self._dropped(self._made.popitem()[1][1])


BUSY_PAUSES = (0.02, 0.05, 0.1, 0.2)
"""Seconds between asking a local Prefect server again whose database was busy (`_BusyRetry`)."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


class _BusyRetry(httpx.BaseTransport):
    """Answers of a Prefect server on this host that its SQLite database was busy (HTTP 503)
    are asked again after `BUSY_PAUSES`, before Prefect's client sees them.

    A run's writes — creating its flow run above all — collide with the server's own (the task
    run recorder and the event persister write what the previous run sent): SQLite refuses
    the later writer at once (`SQLITE_BUSY_SNAPSHOT`), the server answers 503 without a
    Retry-After, and Prefect's client waits 2**1 s before asking again. That made 6 of 16
    back-to-back service runs take 2.0–2.5 s instead of 0.12–0.18 s (bench/README.md); the
    collision is over within milliseconds. After the last pause the 503 goes to Prefect's
    client, whose own back-off applies as before."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self._inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        for pause in BUSY_PAUSES:
            response = self._inner.handle_request(request)
            if response.status_code != httpx.codes.SERVICE_UNAVAILABLE:
                return response
            response.close()
            time.sleep(pause)
        return self._inner.handle_request(request)

    def close(self) -> None:
        self._inner.close()


def _open_client(settings: Settings) -> SyncClientContext:
    """A client context for `settings` (the ones in force) whose client is entered once more
    than the context enters it, so that leaving the context after a run leaves the client open
    for the next one. Against a server on this host, a busy database is asked again at once
    (`_BusyRetry`)."""
    context = SyncClientContext()
    http = context.client._client  # the transport is replaced as Prefect adds its retries
    if http.base_url.host in LOOPBACK_HOSTS and isinstance(http._transport, httpx.HTTPTransport):
        http._transport = _BusyRetry(http._transport)
    context.client.__enter__()
    return context


_without_heartbeat = _PerSettings(
    lambda settings: settings.copy_with_update(updates={PREFECT_FLOWS_HEARTBEAT_FREQUENCY: None}),
    lambda _: None,
)
_lock = threading.Lock()
remembered(__name__, "_without_heartbeat", _without_heartbeat.clear, _lock)
_this_thread = threading.local()


@contextmanager
def in_this_process() -> Iterator[None]:
    """Settings for the flow runs started inside this block (in this thread)."""
    context = get_settings_context()
    with _lock:
        quiet = _without_heartbeat(context.settings)
    with SettingsContext(profile=context.profile, settings=quiet), _client_of_this_thread():
        yield


def _client_of_this_thread() -> AbstractContextManager[object]:
    """This thread's client context for the settings in force, made on first use (none when a
    client context is already active: the run uses that one); one per thread, as a Prefect
    context is entered by one thread at a time."""
    if SyncClientContext.get() is not None:
        return nullcontext()
    if not hasattr(_this_thread, "clients"):
        _this_thread.clients = _PerSettings(_open_client, lambda old: old.client.__exit__())
    clients: _PerSettings[SyncClientContext] = _this_thread.clients
    return clients(get_settings_context().settings)
