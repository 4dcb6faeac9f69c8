"""A real, scripted fake of the OpenAI Batch API for tests: FastAPI + uvicorn on 127.0.0.1.

Tests drive it with the real `openai` SDK over real HTTP. It implements what batch judging uses:

- `POST /v1/files` (multipart, `purpose=batch`), `GET /v1/files/{id}/content`,
  `DELETE /v1/files/{id}`;
- `POST /v1/batches`, `GET /v1/batches/{id}`, `POST /v1/batches/{id}/cancel`.

A batch is `validating` when created and `in_progress` from its first look; at the next look it
is answered, unless `hold()` keeps it `in_progress` until `release()` (its request counts say
what `hold(completed, failed)` was told meanwhile). Each line is answered as
the judge server would answer it (`tests/judge_server.py`: the same `Reply`s and policies, so a
batch run and a synchronous run can be compared), into the output file (status 200) or the
error file (any other status, as OpenAI writes them). Scripted troubles:

- `fail=predicate(batch_number, RecordedRequest)`: that line is answered 500 (error file);
- `expire_after=N`: the next batch answers only its first N lines, then ends `expired`, the rest
  in the error file with code `batch_expired` (as OpenAI does);
- `cancel` (the endpoint) ends a batch `cancelled`, unanswered lines likewise `batch_cancelled`;
- `fail_batch=True`: the next batch ends `failed` at validation, nothing answered.

`server.batches` records every batch created (id, its requests' bodies, status), and
`server.lines_submitted` counts every line ever uploaded in a batch's input file.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from tests.judge_server import Policy, RecordedRequest, Reply, _respond, verdict

START_TIMEOUT_SECONDS = 10.0
FailPredicate = Callable[[int, RecordedRequest], bool]


@dataclass
class FakeBatch:
    """One batch as the fake keeps it."""

    id: str
    number: int
    """1 for the first batch created since the last reset, 2 for the next, …"""
    input_file_id: str
    lines: list[dict[str, Any]]
    metadata: dict[str, str]
    created_at: int
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    expire_after: int | None = None
    fail_at_validation: bool = False

    @property
    def custom_ids(self) -> list[str]:
        return [str(line["custom_id"]) for line in self.lines]

    def bodies(self) -> list[dict[str, Any]]:
        return [dict(line["body"]) for line in self.lines]

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": "/v1/chat/completions",
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": self.created_at,
            "metadata": self.metadata,
            "request_counts": {
                "total": len(self.lines),
                "completed": self.completed,
                "failed": self.failed,
            },
        }


@dataclass
class BatchServer:
    """The fake's state, shared by the server thread and the test, so locked."""

    base_url: str = ""
    policy: Reply | Policy | None = None
    """How each line is answered (a `Reply`, or a policy per request); None: a passing verdict."""
    fail: FailPredicate | None = None
    expire_after: int | None = None
    fail_batch: bool = False
    batches: list[FakeBatch] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    lines_submitted: int = 0
    looks: int = 0
    _held: bool = False
    _held_counts: tuple[int, int] = (0, 0)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _next_id: int = 0

    def reset(self) -> None:
        with self._lock:
            self.policy, self.fail, self.expire_after, self.fail_batch = None, None, None, False
            self.batches, self.files, self.deleted = [], {}, set()
            self.lines_submitted, self.looks, self._held = 0, 0, False

    def hold(self, completed: int = 0, failed: int = 0) -> None:
        """Keep every batch `in_progress` until `release()`, its counts saying `completed` and
        `failed` meanwhile."""
        with self._lock:
            self._held, self._held_counts = True, (completed, failed)

    def release(self) -> None:
        with self._lock:
            self._held = False

    def _id(self, prefix: str) -> str:
        self._next_id += 1
        return f"{prefix}-{self._next_id:06d}"

    def _file(self, data: bytes) -> str:
        file_id = self._id("file")
        self.files[file_id] = data
        return file_id

    def _answer(self, batch: FakeBatch) -> None:
        """Answer the batch's lines (called with the lock held)."""
        outputs: list[str] = []
        errors: list[str] = []
        for index, line in enumerate(batch.lines):
            custom_id = line["custom_id"]
            if batch.fail_at_validation:
                break
            if batch.expire_after is not None and index >= batch.expire_after:
                code = "batch_expired"
                message = "This request could not be executed before the completion window expired."
                errors.append(_error_line(custom_id, code, message))
                continue
            recorded = RecordedRequest(body=line["body"], headers={}, arrived=time.monotonic())
            reply = self._reply(recorded)
            if self.fail is not None and self.fail(batch.number, recorded):
                reply = Reply(status=500, message="The server had an error")
            response = _respond(reply, recorded)
            body = json.loads(bytes(response.body))
            result = {
                "id": f"batch_req_{index}",
                "custom_id": custom_id,
                "response": {"status_code": reply.status, "request_id": "r", "body": body},
                "error": None,
            }
            if reply.status == 200:
                outputs.append(json.dumps(result))
                batch.completed += 1
            else:
                errors.append(json.dumps(result))
                batch.failed += 1
        if batch.fail_at_validation:
            batch.status = "failed"
            return
        if outputs:
            batch.output_file_id = self._file(("\n".join(outputs) + "\n").encode())
        if errors:
            batch.error_file_id = self._file(("\n".join(errors) + "\n").encode())
        batch.status = "expired" if batch.expire_after is not None else "completed"

    def _reply(self, recorded: RecordedRequest) -> Reply:
        policy = self.policy
        if policy is None:
            return verdict()
        return policy if isinstance(policy, Reply) else policy(recorded)

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/files")
        async def upload(request: Request) -> JSONResponse:
            form = await request.form()
            upload = form["file"]
            assert form["purpose"] == "batch" and not isinstance(upload, str)
            data = await upload.read()
            with self._lock:
                file_id = self._file(data)
            return JSONResponse(
                {
                    "id": file_id,
                    "object": "file",
                    "bytes": len(data),
                    "created_at": int(time.time()),
                    "filename": upload.filename or "",
                    "purpose": "batch",
                    "status": "processed",
                }
            )

        @app.get("/v1/files/{file_id}/content")
        async def content(file_id: str) -> PlainTextResponse:
            with self._lock:
                data = self.files.get(file_id)
            if data is None or file_id in self.deleted:
                return PlainTextResponse("no such file", status_code=404)
            return PlainTextResponse(data.decode())

        @app.delete("/v1/files/{file_id}")
        async def delete(file_id: str) -> JSONResponse:
            with self._lock:
                self.deleted.add(file_id)
            return JSONResponse({"id": file_id, "object": "file", "deleted": True})

        @app.post("/v1/batches")
        async def create(request: Request) -> JSONResponse:
            body = await request.json()
            assert body["endpoint"] == "/v1/chat/completions"
            assert body["completion_window"] == "24h"
            with self._lock:
                data = self.files[body["input_file_id"]]
                lines = [json.loads(raw) for raw in data.decode().splitlines() if raw.strip()]
                batch = FakeBatch(
                    id=self._id("batch"),
                    number=len(self.batches) + 1,
                    input_file_id=body["input_file_id"],
                    lines=lines,
                    metadata=body.get("metadata") or {},
                    created_at=int(time.time()),
                    expire_after=self.expire_after,
                    fail_at_validation=self.fail_batch,
                )
                self.expire_after, self.fail_batch = None, False
                self.batches.append(batch)
                self.lines_submitted += len(lines)
                return JSONResponse(batch.as_json())

        @app.get("/v1/batches/{batch_id}")
        async def retrieve(batch_id: str) -> JSONResponse:
            with self._lock:
                self.looks += 1
                batch = next(b for b in self.batches if b.id == batch_id)
                if batch.status == "validating":
                    batch.status = "in_progress"
                elif batch.status == "in_progress" and not self._held:
                    self._answer(batch)
                shown = batch.as_json()
                if batch.status == "in_progress" and self._held:
                    completed, failed = self._held_counts
                    shown["request_counts"].update(completed=completed, failed=failed)
                return JSONResponse(shown)

        @app.post("/v1/batches/{batch_id}/cancel")
        async def cancel(batch_id: str) -> JSONResponse:
            with self._lock:
                batch = next(b for b in self.batches if b.id == batch_id)
                if batch.status in ("validating", "in_progress"):
                    errors = [
                        _error_line(custom_id, "batch_cancelled", "The batch was cancelled.")
                        for custom_id in batch.custom_ids
                    ]
                    batch.error_file_id = self._file(("\n".join(errors) + "\n").encode())
                    batch.status = "cancelled"
                return JSONResponse(batch.as_json())

        return app


def _error_line(custom_id: str, code: str, message: str) -> str:
    error = {"code": code, "message": message}
    return json.dumps({"id": "batch_req", "custom_id": custom_id, "response": None, "error": error})


@pytest.fixture(scope="session")
def batch_server_session() -> Iterator[BatchServer]:
    """One fake Batch API for the session, in a background thread (uvicorn)."""
    state = BatchServer()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    config = uvicorn.Config(
        state.app(), log_config=None, log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="batch-server", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the fake Batch API did not start")
        time.sleep(0.01)
    state.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield state
    finally:
        server.should_exit = True
        thread.join(timeout=5)
        sock.close()


@pytest.fixture
def batch_server(
    batch_server_session: BatchServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[BatchServer]:
    """The session's fake Batch API, reset for this test (no proxy for 127.0.0.1)."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    batch_server_session.reset()
    yield batch_server_session
    batch_server_session.reset()
