"""A client that gives up (issue 34, item 2): `timeout` bounds every read, event streams
included; an answer that is not Assay's, or a malformed service URL, is an `AssayAPIError` (one
line from the command line, exit 2) — never a traceback, never an event stream that silently
yields nothing.

Everything here talks over real loopback sockets: a listener that accepts and never answers, and
an HTTP server that answers what a test sets (a login page, JSON of another shape, an event
stream that stalls). The command line runs as a real `assay` process in client mode
(`ASSAY_URL`). Against a real `assay serve`, the client and the CLI are tested in
tests/test_service_ci.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from assay.client import RECONNECTS, AssayAPIError, AssayClient
from tests.conftest import EXAMPLES

SUITE = str(EXAMPLES / "support-suite.yaml")
OUTPUTS = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
CANARY = "canary-7f3e"
"""In every body the stub answers: no error may quote it."""
LOGIN_PAGE = f"""<!doctype html><html><head><title>Sign in \x1b[31m</title></head>
<body><form>{CANARY} password</form></body></html>""".encode()
CASE = b'event: case\nid: 0\ndata: {"case_id": "c0", "status": "pass", "score": 1.0}\n\n'


def _raised_within(seconds: float, action: Callable[[], object]) -> tuple[BaseException, float]:
    """What `action` raised, and how long it took; fails when it still runs after `seconds`
    (it is left behind in a daemon thread) or returned."""
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            action()
        except BaseException as exc:  # handed to the test
            outcome.append(exc)
        else:
            outcome.append(None)

    started = time.monotonic()
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds} s"
    assert outcome[0] is not None, "returned without raising"
    return outcome[0], time.monotonic() - started


@pytest.fixture
def silent() -> Iterator[str]:
    """The URL of a loopback listener that accepts every connection and never answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def hold() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)

    threading.Thread(target=hold, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()
        for connection in held:
            connection.close()


Respond = Callable[[BaseHTTPRequestHandler], None]


class Stub(ThreadingHTTPServer):
    """A loopback HTTP server answering every request with `respond`; `seen` records each
    request's method, path and `Last-Event-ID`."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.respond: Respond = answer(404, "text/plain", b"")
        self.seen: list[tuple[str, str, str | None]] = []
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Stub

    def _any(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.seen.append((self.command, self.path, self.headers.get("Last-Event-ID")))
        self.server.respond(self)

    do_GET = do_POST = _any

    def log_message(self, *_: Any) -> None:
        pass


def answer(status: int, content_type: str, body: bytes, after: float = 0.0) -> Respond:
    """Answer `status` with `body` as `content_type`, `after` seconds late."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(after)
        handler.send_response(status)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return respond


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()


def test_events_give_up_within_the_timeout_on_a_socket_that_never_answers(silent: str) -> None:
    """It opened its stream with no timeout at all: it waited forever."""
    client = AssayClient(silent, timeout=5)

    error, elapsed = _raised_within(30, lambda: list(client.events("run-1")))

    assert isinstance(error, AssayAPIError) and error.status is None, repr(error)
    assert elapsed < 10
    assert error.detail == f"no answer from {silent} within 5 s (GET /runs/run-1/events)"


@pytest.mark.parametrize("ends", ["stalls", "closes"])
def test_a_stream_that_stalls_or_ends_early_is_resumed_then_given_up(stub: Stub, ends: str) -> None:
    """After its first event the stream says nothing more (an idle proxy, a hung service), or
    ends without a summary: the client resumes it with `Last-Event-ID` RECONNECTS times, then
    raises. It waited forever on the first, and returned silently on the second."""

    def respond(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()
        if handler.headers.get("Last-Event-ID") is None:
            handler.wfile.write(CASE)
            handler.wfile.flush()
        if ends == "stalls":
            stub.stopping.wait()

    stub.respond = respond
    client = AssayClient(stub.url, timeout=1)
    events: list[dict[str, Any]] = []

    error, elapsed = _raised_within(40, lambda: events.extend(client.events("run-1")))

    assert isinstance(error, AssayAPIError) and error.status is None, repr(error)
    assert [event["id"] for event in events] == ["0"]
    assert [seen[2] for seen in stub.seen] == [None] + ["0"] * RECONNECTS
    assert f"after {RECONNECTS} reconnects" in error.detail, error.detail
    # Six reads of at most 1 s each and the back-off between them (0.4 + 0.8 + 1.6 + 2 + 2 s).
    assert elapsed < 20


class Answer:
    """What the stub answers instead of Assay, and what the error must then say."""

    def __init__(self, status: int, content_type: str, body: bytes, said: str) -> None:
        self.respond = answer(status, content_type, body)
        self.said = said


ANSWERS = {
    "a login page": Answer(
        200,
        "text/html; charset=utf-8",
        LOGIN_PAGE,
        "HTTP 200 text/html (page title 'Sign in \\x1b[31m')",
    ),
    "a proxy's error page": Answer(
        502, "text/html", b"<title>Bad Gateway</title>" + CANARY.encode(), "HTTP 502 text/html"
    ),
    "JSON that does not parse": Answer(
        200, "application/json", f"<p>{CANARY}</p>".encode(), "HTTP 200 application/json"
    ),
    "JSON of another shape": Answer(
        200, "application/json", json.dumps({"items": CANARY}).encode(), "HTTP 200 application/json"
    ),
}

CALLS: dict[str, Callable[[AssayClient], object]] = {
    "result": lambda client: client.result("run-1"),
    "runs": lambda client: client.runs(),
    "cases": lambda client: client.cases("run-1"),
    "gate_check": lambda client: client.gate_check("run-1"),
    "publish_suite": lambda client: client.publish_suite({"suite": "s", "cases": []}),
    "run": lambda client: client.run("s", subject="agent:x", outputs=[]),
    "run wait=False": lambda client: client.run("s", subject="agent:x", outputs=[], wait=False),
    "events": lambda client: list(client.events("run-1")),
}


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("answered", ANSWERS)
def test_an_answer_that_is_not_assay_s_is_an_assay_api_error(
    stub: Stub, answered: str, call: str
) -> None:
    """It was a JSONDecodeError, a KeyError or a ValidationError, and `events` yielded nothing."""
    stub.respond = ANSWERS[answered].respond
    client = AssayClient(stub.url, timeout=5)

    error, _ = _raised_within(15, lambda: CALLS[call](client))

    assert isinstance(error, AssayAPIError), repr(error)
    assert error.status is None
    assert error.detail.startswith("not an Assay answer: "), error.detail
    assert ANSWERS[answered].said in error.detail, error.detail
    assert stub.url in error.detail
    assert CANARY not in error.detail and "\n" not in error.detail and "\x1b" not in error.detail


def test_a_waited_run_is_asked_of_a_service_that_answered_then_waited_for_past_the_timeout(
    stub: Stub,
) -> None:
    """The service answers a waited-for run when it ends, so `timeout` cannot bound that
    answer: the client first makes sure Assay answers (`/livez`, within `timeout`), then
    waits for the run (`wait_timeout`). A second run on the same client skips the check."""
    alive = answer(200, "application/json", b'{"status": "alive"}')
    problem = json.dumps(
        {"type": "about:blank", "title": "Not Found", "status": 404, "detail": "x"}
    )
    ran = answer(404, "application/problem+json", problem.encode(), after=2.5)
    stub.respond = lambda handler: (alive if handler.path == "/livez" else ran)(handler)
    client = AssayClient(stub.url, timeout=1)

    for _ in range(2):
        error, elapsed = _raised_within(30, lambda: client.run("s", subject="agent:x", outputs=[]))
        assert isinstance(error, AssayAPIError) and error.status == 404, repr(error)
        assert elapsed >= 2.5

    assert [(method, path) for method, path, _ in stub.seen] == [
        ("GET", "/livez"),
        ("POST", "/runs"),
        ("POST", "/runs"),
    ]


def _cli(*args: str, env: dict[str, str]) -> tuple[str, float]:
    """Run `assay ARGS` in client mode; assert exit 2, one line on stderr and no traceback;
    return the line and how long it took."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))},
            "NO_PROXY": "127.0.0.1,localhost",
            **env,
        },
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 2, (args, done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert len(lines[0]) < 400, lines[0]
    return lines[0], elapsed


RUN_BY_NAME = ("run", "support-bot", "--outputs", OUTPUTS, "--subject", "agent:bot@v1")


@pytest.mark.parametrize(
    ("url", "command"),
    [
        ("http://[::1", ("runs", "show", "abcd")),
        ("http://[::1", RUN_BY_NAME),
        ("http://[::1", ("gate", "--check", "abcd")),
        ("ftp://x", ("runs", "list")),
        ("localhost:99999", ("runs", "show", "abcd")),
        ("http://localhost:99999", ("runs", "cases", "abcd")),
        ("http://", ("runs", "show", "abcd", "--json")),
    ],
)
def test_a_malformed_assay_url_is_one_line_from_the_cli(url: str, command: tuple[str, ...]) -> None:
    """`http://[::1` was an InvalidURL traceback; `localhost:99999` was 'cannot reach' with
    httpx's complaint about a `localhost://` protocol."""
    line, _ = _cli(*command, env={"ASSAY_URL": url})

    assert line.startswith(f"error: invalid service URL {url!r}: "), line
    assert line.endswith("expected http(s)://HOST[:PORT]"), line


@pytest.mark.parametrize("value", ["soon", "0", "nan"])
def test_a_malformed_assay_timeout_is_one_line_from_the_cli(value: str) -> None:
    line, _ = _cli("runs", "list", env={"ASSAY_URL": "http://127.0.0.1:9", "ASSAY_TIMEOUT": value})

    assert line == f"error: ASSAY_TIMEOUT must be a number of seconds above 0, not {value!r}"


@pytest.mark.parametrize(
    "command",
    [("runs", "show", "abcd"), ("runs", "list"), RUN_BY_NAME],
    ids=lambda c: " ".join(c[:2]),
)
def test_the_cli_prints_one_line_for_a_socket_that_never_answers(
    silent: str, command: tuple[str, ...]
) -> None:
    """It waited 600 s; a waited-for run (`assay run` by name) waits once the service has
    answered, so it gives up as soon as the rest."""
    line, elapsed = _cli(*command, env={"ASSAY_URL": silent, "ASSAY_TIMEOUT": "2"})

    assert line.startswith(f"error: no answer from {silent} within 2 s ("), line
    assert elapsed < 15


@pytest.mark.parametrize(
    "command",
    [
        ("runs", "show", "abcd"),
        ("runs", "show", "abcd", "--json"),
        ("runs", "list"),
        RUN_BY_NAME,
        ("run", SUITE, "--outputs", OUTPUTS),
    ],
    ids=lambda command: " ".join(command[:3]).replace(str(EXAMPLES), "examples"),
)
def test_the_cli_prints_one_line_for_an_html_answer(stub: Stub, command: tuple[str, ...]) -> None:
    """It printed a 48–69-line traceback."""
    stub.respond = ANSWERS["a login page"].respond

    line, _ = _cli(*command, env={"ASSAY_URL": stub.url})

    assert line.startswith(f"error: not an Assay answer: GET {stub.url}/") or line.startswith(
        f"error: not an Assay answer: POST {stub.url}/"
    ), line
    assert "answered HTTP 200 text/html (page title 'Sign in \\x1b[31m')" in line, line
    assert CANARY not in line


@pytest.mark.parametrize(
    ("command", "body", "said"),
    [
        (("runs", "list"), {"items": [{"id": CANARY}], "next_cursor": None}, "RunAggregate"),
        (("runs", "show", "abcd"), {"id": CANARY}, "EvalResult"),
        (("runs", "cases", "abcd"), {"items": [{"id": CANARY}], "next_cursor": None}, "CaseResult"),
    ],
    ids=["runs list", "runs show", "runs cases"],
)
def test_the_cli_prints_one_line_for_json_of_another_shape(
    stub: Stub, command: tuple[str, ...], body: dict[str, Any], said: str
) -> None:
    """A JSON service that is not Assay, or an Assay of another version: it printed a
    ValidationError's traceback."""
    stub.respond = answer(200, "application/json", json.dumps(body).encode())

    line, _ = _cli(*command, env={"ASSAY_URL": stub.url})

    assert line.startswith(f"error: not an Assay answer: GET {stub.url}/runs"), line
    assert f", not the {said} expected (" in line, line
    assert CANARY not in line


@pytest.mark.parametrize("run_id", ["../suites", "abcd\nef", "a b?c#d"])
def test_a_run_id_is_one_path_segment_whatever_it_holds(stub: Stub, run_id: str) -> None:
    """`../suites` asked for `/suites`, and a newline was an httpx InvalidURL traceback."""
    client = AssayClient(stub.url, timeout=2)
    error, _ = _raised_within(10, lambda: client.result(run_id))
    assert isinstance(error, AssayAPIError), repr(error)
    ((method, path, _),) = stub.seen
    assert method == "GET" and path.startswith("/runs/") and path.count("/") == 2, path
