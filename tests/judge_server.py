"""A real, scripted OpenAI-compatible judge server for tests: FastAPI + uvicorn on 127.0.0.1.

Tests talk to it with the real `openai` SDK over real HTTP, so retries, timeouts, headers and
structured-output fallbacks meet a real server. It implements `POST /v1/chat/completions` (with
`usage` figures) and answers from a script that each test sets:

- a queue of `Reply`s, one per request (`script(verdict(...), rate_limited(1), ...)`), then a
  `default` (a `Reply`, or a policy `callable(RecordedRequest) -> Reply`), else a passing verdict;
- `rejects={"json_schema": 400}`: answer that status to a response_format mode without using up
  the queue; `llama_cpp=True` is `rejects={"json_schema": 500}`, as `llama_cpp.server` does;
- `position_biased=True`: pairwise prompts (those asking for a `"winner"`) always get
  `"winner": "first"`, whatever order the responses come in — a judge with pure position bias;
- `default=prefers("MARKER")`: a consistent pairwise judge that picks whichever response holds
  the marker (`RecordedRequest.response(n)` reads a response out of the prompt);
- `default=grades_by_reference()` (`tests/judge_grading.py`): a judge right on every answer with
  a reference, or (`obeys_injections=True`) one its candidates can steer;
- `capacity=N`: a provider's limit on calls at once — a request arriving while N are being
  served gets `over_capacity()` at once (429 with `Retry-After-Ms`, as OpenAI sends it), before
  the script is looked at; `RecordedRequest.over_capacity` marks those;
- `together=N`: the first N requests are answered only once N have arrived (each waits at most
  `TOGETHER_WAIT_SECONDS`): N callers' first calls are surely in flight at the same time.

Every request is recorded (`server.requests`: body, headers, arrival and finish times, mode), and
`server.max_in_flight` is the most requests it was serving at once, for concurrency tests.

It also implements `POST /v1/embeddings` (for the outcome score's consistency dimension):
each input text gets `bag_of_words(text)`, a deterministic hashed bag-of-words vector, so tests
can compute the expected cosines and centroids themselves. `server.embedded` counts the texts
embedded since the last reset (their text is not kept).

Use the `judge_server` fixture (reset for each test; one server per session):

    def test_x(judge_server: JudgeServer) -> None:
        judge_server.script(verdict("pass", 0.9), default=malformed())
        judge = OpenAIJudge("m", base_url=judge_server.base_url, api_key="test")
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

START_TIMEOUT_SECONDS = 10.0
TOGETHER_WAIT_SECONDS = 30.0
EMBEDDING_DIMENSIONS = 32
DEFAULT_USAGE = (120, 30)
LLAMA_CPP_REJECTS: Mapping[str, int] = {"json_schema": 500}


@dataclass(frozen=True)
class Reply:
    """One scripted answer.

    Attributes:
        status: HTTP status; 200 answers a completion, anything else an OpenAI-style error.
        content: The assistant message text (200 only); None sends `"content": null`.
        delay: Seconds to wait before answering (slow judge; concurrency tests).
        headers: Extra response headers (`Retry-After`, …).
        usage: (prompt_tokens, completion_tokens), or None to send no `usage` at all.
        message: The error message in an error body (servers often echo the request here).
        honours_max_tokens: False plays a judge that bills past the request's `max_tokens`:
            its text and `usage` are sent as scripted instead of cut at the cap.
    """

    status: int = 200
    content: str | None = None
    delay: float = 0.0
    headers: Mapping[str, str] = field(default_factory=dict)
    usage: tuple[int, int] | None = DEFAULT_USAGE
    message: str = "scripted error"
    honours_max_tokens: bool = True


def verdict(
    decision: str = "pass",
    score: float = 1.0,
    reasoning: str = "The output meets the rubric.",
    **options: Any,
) -> Reply:
    """A well-formed verdict reply (reasoning first, as the prompt asks)."""
    body = {"reasoning": reasoning, "score": score, "verdict": decision}
    return Reply(content=json.dumps(body), **options)


def pair_verdict(
    winner: str = "first", reasoning: str = "One response meets the rubric better.", **options: Any
) -> Reply:
    """A well-formed pairwise reply (reasoning first, then the winner)."""
    body = {"reasoning": reasoning, "winner": winner}
    return Reply(content=json.dumps(body), **options)


def malformed(content: str = "I think it passes.", **options: Any) -> Reply:
    """A 200 reply whose text breaks the reply contract."""
    return Reply(content=content, **options)


def rate_limited(retry_after: float | None = 1.0, **options: Any) -> Reply:
    """A 429, with `Retry-After: <seconds>` unless `retry_after` is None."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return Reply(status=429, headers=headers, message="rate limit reached", **options)


def over_capacity(retry_after: float = 0.1) -> Reply:
    """The 429 a provider answers beyond its limit: `Retry-After-Ms` (read first) and the
    whole seconds of `Retry-After`."""
    headers = {
        "Retry-After-Ms": f"{retry_after * 1000:.0f}",
        "Retry-After": f"{max(1, round(retry_after))}",
    }
    return Reply(status=429, headers=headers, message="too many requests in flight")


def server_error(status: int = 500, **options: Any) -> Reply:
    """A 5xx (or any other status) error reply."""
    return Reply(status=status, message="the server had an error", **options)


def slow(seconds: float, reply: Reply | None = None) -> Reply:
    """`reply` (default: a passing verdict) answered after `seconds`."""
    return replace(reply or verdict(), delay=seconds)


@dataclass
class RecordedRequest:
    """One request the server received.

    Attributes:
        body: The parsed JSON body.
        headers: Request headers (lower-case names).
        arrived: `time.monotonic()` when it arrived.
        finished: `time.monotonic()` when the answer was sent (None while in flight).
        status: The status it was answered with (None while in flight).
    """

    body: dict[str, Any]
    headers: dict[str, str]
    arrived: float
    finished: float | None = None
    status: int | None = None
    generation: int = 0
    """Which `reset` period it arrived in: one still in flight from before a reset (a test
    that gave up on a slow reply) is not counted in the next test's `max_in_flight`."""
    over_capacity: bool = False
    """Refused with 429 because `capacity` requests were being served (never served)."""

    @property
    def mode(self) -> str:
        """`json_schema`, `json_object` or `prompt` (no `response_format`)."""
        response_format = self.body.get("response_format")
        if isinstance(response_format, dict):
            return str(response_format.get("type", "prompt"))
        return "prompt"

    def text(self, role: str) -> str:
        """The concatenated text of every message with `role`."""
        parts = []
        for message in self.body.get("messages", []):
            if isinstance(message, dict) and message.get("role") == role:
                content = message.get("content")
                parts.append(content if isinstance(content, str) else json.dumps(content))
        return "\n".join(parts)

    @property
    def is_pairwise(self) -> bool:
        """Whether the prompt asks for a pairwise `winner`."""
        return '"winner"' in self.text("system")

    def response(self, number: int) -> str | None:
        """The text of `Response <number>` in a pairwise prompt (between its fence markers)."""
        match = re.search(
            rf"<<<BEGIN RESPONSE {number} (\w+)>>>\n(.*?)\n<<<END RESPONSE {number} \1>>>",
            self.text("user"),
            re.DOTALL,
        )
        return None if match is None else match.group(2)


Policy = Callable[[RecordedRequest], Reply]


def bag_of_words(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic embedding: word counts hashed into `dimensions` buckets (not normalised).

    Words are lower-cased runs of letters and digits; each adds 1 to the bucket its SHA-256
    picks. Texts sharing words point the same way, so cosines are easy to reason about.
    """
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        bucket = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % dimensions
        vector[bucket] += 1.0
    return vector


def prefers(marker: str, reasoning: str = "It meets the rubric better.") -> Policy:
    """A consistent pairwise judge: the response containing `marker` wins, in either order
    (`tie` when both or neither do). Requests that are not pairwise get a passing verdict."""

    def policy(recorded: RecordedRequest) -> Reply:
        if not recorded.is_pairwise:
            return verdict()
        first = marker in (recorded.response(1) or "")
        second = marker in (recorded.response(2) or "")
        winner = "tie" if first == second else "first" if first else "second"
        return pair_verdict(winner, reasoning)

    return policy


class JudgeServer:
    """The server's script and records; shared by the server thread and the test, so locked."""

    def __init__(self) -> None:
        self.base_url = ""
        self._lock = threading.Lock()
        self._queue: deque[Reply] = deque()
        self._default: Reply | Policy | None = None
        self._rejects: dict[str, int] = {}
        self._position_biased = False
        self._requests: list[RecordedRequest] = []
        self._in_flight = 0
        self._serving = 0
        self._capacity: int | None = None
        self._together = 0
        self._generation = 0
        self._max_in_flight = 0
        self._embedded = 0

    def script(
        self,
        *replies: Reply,
        default: Reply | Policy | None = None,
        rejects: Mapping[str, int] | None = None,
        llama_cpp: bool = False,
        position_biased: bool = False,
        capacity: int | None = None,
        together: int = 0,
    ) -> None:
        """Set how the server answers from now on (replaces any earlier script).

        Args:
            *replies: Answers to the next requests, in order (rejected modes use none).
            default: The answer once the queue is empty: a `Reply`, or a policy called with
                each request. None: a passing verdict.
            rejects: Status to answer for a response_format mode (`json_schema`,
                `json_object`, `prompt`), before the queue is looked at.
            llama_cpp: Answer 500 to `json_schema` and accept `json_object`, like
                `llama_cpp.server`.
            position_biased: Pairwise prompts always get `"winner": "first"`.
            capacity: Requests served at once at most; one more gets `over_capacity()`.
            together: The first `together` requests are answered once that many arrived.
        """
        merged = dict(LLAMA_CPP_REJECTS) if llama_cpp else {}
        merged.update(rejects or {})
        with self._lock:
            self._queue = deque(replies)
            self._default = default
            self._rejects = merged
            self._position_biased = position_biased
            self._capacity = capacity
            self._together = together

    def reset(self) -> None:
        """Forget the script, the recorded requests and the in-flight maximum."""
        self.script()
        with self._lock:
            self._requests = []
            self._generation += 1
            self._in_flight = 0
            self._serving = 0
            self._max_in_flight = 0
            self._embedded = 0

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received since the last reset, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def max_in_flight(self) -> int:
        """The most requests being served at the same time since the last reset."""
        with self._lock:
            return self._max_in_flight

    @property
    def embedded(self) -> int:
        """Texts embedded by `POST /v1/embeddings` since the last reset."""
        with self._lock:
            return self._embedded

    @property
    def modes(self) -> list[str]:
        """The response_format mode of every recorded request, in order."""
        return [recorded.mode for recorded in self.requests]

    def _arrive(self, recorded: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(recorded)
            recorded.generation = self._generation
            self._in_flight += 1
            self._max_in_flight = max(self._max_in_flight, self._in_flight)
            if self._capacity is not None and self._serving >= self._capacity:
                recorded.over_capacity = True
                return over_capacity()
            self._serving += 1
            rejected = self._rejects.get(recorded.mode)
            if rejected is not None:
                return Reply(status=rejected, message=f"{recorded.mode} is not supported")
            if self._position_biased and recorded.is_pairwise:
                body = {"reasoning": "The first response is better.", "winner": "first"}
                return Reply(content=json.dumps(body))
            if self._queue:
                return self._queue.popleft()
            default = self._default
        if default is None:
            return verdict()
        return default if isinstance(default, Reply) else default(recorded)

    async def _wait_for_company(self, recorded: RecordedRequest) -> None:
        """Hold one of the first `together` requests until that many have arrived."""
        deadline = time.monotonic() + TOGETHER_WAIT_SECONDS
        while time.monotonic() < deadline:
            with self._lock:
                first = any(r is recorded for r in self._requests[: self._together])
                if not first or len(self._requests) >= self._together:
                    return
            await asyncio.sleep(0.01)

    def _leave(self, recorded: RecordedRequest, status: int) -> None:
        with self._lock:
            if recorded.generation == self._generation:
                self._in_flight -= 1
                self._serving -= not recorded.over_capacity
            recorded.finished = time.monotonic()
            recorded.status = status

    def app(self) -> FastAPI:
        """The FastAPI application serving this script."""
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def completions(request: Request) -> JSONResponse:
            body = await request.json()
            recorded = RecordedRequest(
                body=body if isinstance(body, dict) else {},
                headers={name.lower(): value for name, value in request.headers.items()},
                arrived=time.monotonic(),
            )
            reply = self._arrive(recorded)
            try:
                await self._wait_for_company(recorded)
                if reply.delay:
                    await asyncio.sleep(reply.delay)
                return _respond(reply, recorded)
            finally:
                self._leave(recorded, reply.status)

        @app.post("/v1/embeddings")
        async def embeddings(request: Request) -> JSONResponse:
            body = await request.json()
            texts = body.get("input", [])
            texts = [texts] if isinstance(texts, str) else list(texts)
            with self._lock:
                self._embedded += len(texts)
            data = [
                {"object": "embedding", "index": index, "embedding": bag_of_words(text)}
                for index, text in enumerate(texts)
            ]
            words = sum(len(text.split()) for text in texts)
            return JSONResponse(
                {
                    "object": "list",
                    "data": data,
                    "model": str(body.get("model", "")),
                    "usage": {"prompt_tokens": words, "total_tokens": words},
                }
            )

        return app


def _respond(reply: Reply, recorded: RecordedRequest) -> JSONResponse:
    if reply.status != 200:
        error = {"message": reply.message, "type": "scripted_error", "code": str(reply.status)}
        return JSONResponse({"error": error}, status_code=reply.status, headers=dict(reply.headers))
    content, finish_reason, usage = reply.content, "stop", reply.usage
    cap = recorded.body.get("max_tokens")
    if reply.honours_max_tokens and isinstance(cap, int) and usage is not None and usage[1] > cap:
        # As a real server does: the answer stops at max_tokens (and is billed as such).
        content = content[: cap * 4] if content is not None else None
        finish_reason, usage = "length", (usage[0], cap)
    body: dict[str, Any] = {
        "id": f"chatcmpl-{int(recorded.arrived * 1e6)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(recorded.body.get("model", "")),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
    }
    if usage is not None:
        prompt_tokens, completion_tokens = usage
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
    return JSONResponse(body, headers=dict(reply.headers))


@pytest.fixture(scope="session")
def judge_server_session() -> Iterator[JudgeServer]:
    """One scripted judge server for the session, in a background thread (uvicorn)."""
    state = JudgeServer()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        state.app(),
        log_config=None,  # leave the test session's logging alone
        log_level="warning",
        access_log=False,
        lifespan="off",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="judge-server", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the judge test server did not start")
        time.sleep(0.01)
    state.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


@pytest.fixture
def judge_server(
    judge_server_session: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[JudgeServer]:
    """The session's judge server with a clean script and record for this test.

    Also makes sure a proxy from the environment cannot capture requests to 127.0.0.1.
    """
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    judge_server_session.reset()
    yield judge_server_session
    judge_server_session.reset()


@pytest.fixture
def judge_env(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    """The judge server configured as the environment's judge (`ASSAY_JUDGE_MODEL`, key, URL)."""
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-test-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    return judge_server
