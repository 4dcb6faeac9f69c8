"""A Prefect server on this host whose SQLite database was busy answers 503 without a
Retry-After, and Prefect's client then waits two seconds before asking again: 6 of 16
back-to-back runs through the local service took 2.0–2.5 s instead of 0.12–0.18 s. The client
that runs use (`flows.local.in_this_process`) asks again within milliseconds.

The API here is a real HTTP server on loopback answering as Prefect's does for a busy database
(`{"exception_message": "Service Unavailable"}`, 503) the first times it is asked."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import prefect
import pytest
from prefect.client.orchestration import get_client
from prefect.settings import PREFECT_API_URL, temporary_settings

from flows.local import in_this_process

BUSY_ANSWERS = 2


class BusyAPI(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.asked = 0
        self.lock = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    server: BusyAPI

    def do_GET(self) -> None:
        if self.path.endswith("/admin/version"):  # the client's version check: same version
            self._answer(200, prefect.__version__)
            return
        with self.server.lock:
            self.server.asked += 1
            busy = self.server.asked <= BUSY_ANSWERS
        self._answer(*((503, {"exception_message": "Service Unavailable"}) if busy else (200, {})))

    def _answer(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def busy_api() -> Iterator[BusyAPI]:
    server = BusyAPI()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_busy_local_prefect_database_is_asked_again_within_milliseconds(
    busy_api: BusyAPI,
) -> None:
    url = f"http://127.0.0.1:{busy_api.server_address[1]}/api"
    with temporary_settings({PREFECT_API_URL: url}), in_this_process():
        started = time.monotonic()
        answer = get_client(sync_client=True).hello()
        seconds = time.monotonic() - started

    assert answer.status_code == 200
    assert busy_api.asked == BUSY_ANSWERS + 1
    assert seconds < 1.0  # Prefect's client alone waits 2**1 s, then 2**2 s
