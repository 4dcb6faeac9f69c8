"""A tiny scripted HTTP server on 127.0.0.1 for tests that stand in for someone else's API
(a Prefect API that counts what it is asked, one that stops answering): each GET and POST is
answered `answer(method, path)` → (status, a JSON-able body), and nothing is logged."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """Subclass and define `answer`."""

    def answer(self, method: str, path: str) -> tuple[int, object]:
        raise NotImplementedError

    def do_GET(self) -> None:
        self._send(*self.answer("GET", self.path))

    def do_POST(self) -> None:
        self._send(*self.answer("POST", self.path))

    def _send(self, status: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def serving(handler: type[JsonHandler]) -> Iterator[ThreadingHTTPServer]:
    """`handler` served on a free loopback port until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
