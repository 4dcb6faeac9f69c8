"""A Prefect server on this host whose SQLite database was busy answers 503 without a
Retry-After, and Prefect's client then waits two seconds before asking again: 6 of 16
back-to-back runs through the local service took 2.0–2.5 s instead of 0.12–0.18 s. The client
that runs use (`flows.local.in_this_process`) asks again within milliseconds.

The API here is a real HTTP server on loopback answering as Prefect's does for a busy database
(`{"exception_message": "Service Unavailable"}`, 503) the first times it is asked."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import prefect
import pytest
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL, temporary_settings

from flows.local import in_this_process
from tests.local_http import JsonHandler, serving

BUSY_ANSWERS = 2


class _Busy(JsonHandler):
    """Busy for the first `BUSY_ANSWERS` requests (the version check aside), then answers."""

    asked = 0
    lock = threading.Lock()

    def answer(self, method: str, path: str) -> tuple[int, object]:
        if path.endswith("/admin/version"):  # the client's version check: same version
            return 200, prefect.__version__
        with self.lock:
            type(self).asked += 1
            busy = type(self).asked <= BUSY_ANSWERS
        return (503, {"exception_message": "Service Unavailable"}) if busy else (200, {})


@pytest.fixture
def busy_api() -> Iterator[ThreadingHTTPServer]:
    _Busy.asked = 0
    with serving(_Busy) as server:
        yield server


def test_a_busy_local_prefect_database_is_asked_again_within_milliseconds(
    busy_api: ThreadingHTTPServer,
) -> None:
    url = f"http://127.0.0.1:{busy_api.server_address[1]}/api"
    with temporary_settings({PREFECT_API_URL: url}), in_this_process():
        started = time.monotonic()
        answer = get_client(sync_client=True).hello()
        seconds = time.monotonic() - started

    assert answer.status_code == 200
    assert _Busy.asked == BUSY_ANSWERS + 1
    assert seconds < 1.0  # Prefect's client alone waits 2**1 s, then 2**2 s
