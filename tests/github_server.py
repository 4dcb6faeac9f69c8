"""A local fake of GitHub's REST API for issue comments: a real HTTP server on 127.0.0.1.

It serves what `assay github comment` calls — list a pull request's comments (paged, with a
`Link: <…>; rel="next"` header as GitHub sends), create one, update one — keeps the comments in
memory and records every request, so tests can see what was sent, with which `Authorization`
header, and how many pages were read. A request without the expected bearer token is 401
("Bad credentials"), a token named in `read_only_tokens` is 403, an unknown repository or pull
request is 404, as GitHub answers.

It can also misbehave as a broken or hostile API would: answer the next requests of a method with
scripted answers (`scripted`: a 429 with `Retry-After`, a 502 after the write took effect, a 200
of the wrong shape), point its `next` links at another origin (`next_link_origin`), or paginate
forever (`endless_listing`).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

TOKEN = "ghs_fake-token-for-tests"
REPOSITORY = "acme/agent"
PULL_REQUEST = 7

_LIST = re.compile(r"/repos/([^/]+/[^/]+)/issues/(\d+)/comments")
_ONE = re.compile(r"/repos/([^/]+/[^/]+)/issues/comments/(\d+)")


@dataclass
class Recorded:
    """One request the fake received."""

    method: str
    path: str
    query: dict[str, list[str]]
    authorization: str | None
    body: Any


@dataclass
class Answer:
    """A scripted answer, sent instead of the fake's own. `payload` is sent as JSON, or as it is
    when bytes; with `after_taking_effect` the request does what it asks first (a comment created
    or updated), as when GitHub fails after the write."""

    status: int
    payload: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    after_taking_effect: bool = False


@dataclass
class FakeGitHub:
    """The fake's state: comments per (repository, issue), and every request received."""

    url: str = ""
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    read_only_tokens: set[str] = field(default_factory=set)
    scripted: dict[str, list[Answer]] = field(default_factory=dict)
    """Answers to the next requests of a method ("GET", "POST", "PATCH"), in order, sent instead
    of the fake's own."""
    next_link_origin: str = ""
    """The origin the listing's `next` links point at (default: the fake's own)."""
    endless_listing: bool = False
    """Every listing page links a next one, forever."""
    _next_id: int = 1000

    def add_comment(self, repository: str, issue: int, body: str, user: str = "someone") -> int:
        """A comment already on the pull request; returns its id."""
        self._next_id += 1
        self.comments.setdefault((repository, issue), []).append(
            {
                "id": self._next_id,
                "body": body,
                "user": {"login": user},
                "html_url": f"https://github.example/{repository}/pull/{issue}"
                f"#issuecomment-{self._next_id}",
            }
        )
        return self._next_id

    def find(self, comment_id: int) -> dict[str, Any] | None:
        return next(
            (c for listed in self.comments.values() for c in listed if c["id"] == comment_id),
            None,
        )

    def writes(self) -> list[Recorded]:
        return [r for r in self.requests if r.method in {"POST", "PATCH"}]


def _handler(state: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, payload: Any, headers: dict[str, str]) -> None:
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _handle(self) -> None:
            parts = urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            auth = self.headers.get("Authorization")
            state.requests.append(
                Recorded(self.command, parts.path, parse_qs(parts.query), auth, body)
            )
            pending = state.scripted.get(self.command)
            scripted = pending.pop(0) if pending else None
            if scripted is not None and not scripted.after_taking_effect:
                self._answer(scripted.status, scripted.payload, scripted.headers)
                return
            status, payload, headers = self._own_answer(parts.path, parts.query, auth, body)
            if scripted is not None:
                status, payload, headers = scripted.status, scripted.payload, scripted.headers
            self._answer(status, payload, headers)

        def _own_answer(
            self, path: str, query: str, auth: str | None, body: Any
        ) -> tuple[int, Any, dict[str, str]]:
            token = (auth or "").removeprefix("Bearer ")
            if (
                not auth
                or not auth.startswith("Bearer ")
                or token not in {TOKEN, *state.read_only_tokens}
            ):
                return 401, {"message": "Bad credentials"}, {}
            if listing := _LIST.fullmatch(path):
                key = (listing.group(1), int(listing.group(2)))
                if key not in state.comments:
                    return 404, {"message": "Not Found"}, {}
                if self.command == "GET":
                    return self._list(key, parse_qs(query), path)
                if self.command == "POST" and token in state.read_only_tokens:
                    return 403, {"message": "Resource not accessible by integration"}, {}
                if self.command == "POST":
                    comment_id = state.add_comment(key[0], key[1], body["body"], user="assay-bot")
                    return 201, state.find(comment_id), {}
                return 405, {"message": "Method Not Allowed"}, {}
            if (one := _ONE.fullmatch(path)) and self.command == "PATCH":
                comment = state.find(int(one.group(2)))
                if comment is None:
                    return 404, {"message": "Not Found"}, {}
                if token in state.read_only_tokens:
                    return 403, {"message": "Resource not accessible by integration"}, {}
                comment["body"] = body["body"]
                return 200, comment, {}
            return 404, {"message": "Not Found"}, {}

        def _list(
            self, key: tuple[str, int], query: dict[str, list[str]], path: str
        ) -> tuple[int, Any, dict[str, str]]:
            per_page = min(int(query.get("per_page", ["30"])[0]), 100)
            page = int(query.get("page", ["1"])[0])
            listed = state.comments[key]
            items = listed[(page - 1) * per_page : page * per_page]
            headers = {}
            if state.endless_listing or page * per_page < len(listed):
                origin = state.next_link_origin or state.url
                headers["Link"] = (
                    f'<{origin}{path}?per_page={per_page}&page={page + 1}>; rel="next"'
                )
            return 200, items, headers

        do_GET = do_POST = do_PATCH = _handle

    return Handler


@contextmanager
def running_fake_github(*pull_requests: tuple[str, int]) -> Iterator[FakeGitHub]:
    """The fake on a free port, with these pull requests open (no comments yet)."""
    state = FakeGitHub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    for key in pull_requests:
        state.comments[key] = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def fake_github(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGitHub]:
    """The fake with pull request `PULL_REQUEST` of `REPOSITORY` open; GITHUB_API_URL,
    GITHUB_TOKEN and GITHUB_REPOSITORY point at it as in Actions."""
    with running_fake_github((REPOSITORY, PULL_REQUEST)) as state:
        monkeypatch.setenv("GITHUB_API_URL", state.url)
        monkeypatch.setenv("GITHUB_TOKEN", TOKEN)
        monkeypatch.setenv("GITHUB_REPOSITORY", REPOSITORY)
        yield state
