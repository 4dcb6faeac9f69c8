"""A scripted local model server for the framework recordings: FastAPI + uvicorn on 127.0.0.1.

Real agent frameworks talk to it with their real SDKs over real HTTP. It implements

- OpenAI Chat Completions, `POST /v1/chat/completions` (the raw `openai` client, LangChain);
- OpenAI Responses, `POST /v1/responses` (the OpenAI Agents SDK's default);
- Anthropic Messages, `POST /v1/messages`;

each non-streaming (a request asking to stream gets a 400 saying so), with usage figures in
every answer. It keeps no conversation state: the case is the `[case:NAME]` marker found
anywhere in the request (the scenario's prompt carries it), and the turn is read off the tool
calls the request already holds: with none the model makes the scenario's first step of calls,
after those the second, and so on; once all were made it answers the final text. For a
conversation (`CONVERSATIONS`) the user messages in the request say which of its turns is
scripted, and only the calls since the last of them count. The calls of
one step come in ONE response (parallel tool calls). Token usage is `usage_for(turn)`.

Tool call ids are deterministic: `call_<case>_<step>_<n>` (Chat Completions and the Responses
`call_id`; the Responses item id is `fc_…`), `toolu_<case>_<step>_<n>` for Anthropic.

Run one for a while with `python -m tests.frameworks.model_server` (prints its URL), or use
`running_model_server()` / `ModelServer.start()` in code.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from tests.frameworks.scenarios import (
    CASE_MARKER,
    CONVERSATIONS,
    SCENARIOS,
    Call,
    Scenario,
    usage_for,
)

START_TIMEOUT_SECONDS = 10.0


class ScriptError(Exception):
    """A request the script cannot answer (no case marker, unknown case, too many calls)."""


def _case_name(body: dict[str, Any]) -> str:
    match = CASE_MARKER.search(json.dumps(body))
    if match is None:
        raise ScriptError("no [case:NAME] marker in the request")
    return match.group(1)


def _case(body: dict[str, Any], users: int) -> Scenario:
    """The script of the case `body` is for, at its `users`-th user message."""
    name = _case_name(body)
    if name in CONVERSATIONS:
        turns = CONVERSATIONS[name].turns
        if not 1 <= users <= len(turns):
            raise ScriptError(f"{users} user messages; conversation {name} has {len(turns)}")
        return turns[users - 1]
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise ScriptError(f"unknown case {name!r}")
    return scenario


def _turn(scenario: Scenario, calls_made: int) -> int:
    """The model turn whose answer is due once `calls_made` tool calls are in the conversation."""
    made = 0
    for turn, step in enumerate(scenario.steps):
        if made == calls_made:
            return turn
        made += len(step)
    if made == calls_made:
        return len(scenario.steps)
    raise ScriptError(
        f"{calls_made} tool calls in the request; case {scenario.name} scripts steps of "
        f"{[len(step) for step in scenario.steps]}"
    )


Position = tuple[int, int]
"""(user messages in the request, tool calls made since the last of them)."""


def _due(body: dict[str, Any], at: Position) -> tuple[Scenario, int, list[tuple[str, Call]]]:
    """The script `body` is at, the model turn due once it holds those calls, and that turn's
    calls (none for the final text), each with its id's stem `<case>_<step>_<n>` (after the
    first user message `<case>_u<users>_<step>_<n>`, unique in the conversation)."""
    users, calls_made = at
    scenario = _case(body, users)
    turn = _turn(scenario, calls_made)
    calls = scenario.steps[turn] if turn < len(scenario.steps) else ()
    stem = scenario.name if users <= 1 else f"{scenario.name}_u{users}"
    return scenario, turn, [(f"{stem}_{turn}_{n}", call) for n, call in enumerate(calls)]


def _chat_position(body: dict[str, Any]) -> Position:
    users = calls = 0
    for message in body.get("messages", []):
        if isinstance(message, dict) and message.get("role") == "user":
            users, calls = users + 1, 0
        elif isinstance(message, dict) and message.get("role") == "assistant":
            calls += len(message.get("tool_calls") or [])
    return users, calls


def _responses_position(body: dict[str, Any]) -> Position:
    items = body.get("input")
    if not isinstance(items, list):
        return 1, 0
    users = calls = 0
    for item in items:
        if not isinstance(item, dict):
            continue
        if item.get("type", "message") == "message" and item.get("role") == "user":
            users, calls = users + 1, 0
        elif item.get("type") == "function_call":
            calls += 1
    return users, calls


def _anthropic_position(body: dict[str, Any]) -> Position:
    users = calls = 0
    for message in body.get("messages", []):
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
        if message.get("role") == "user":
            if not any(block.get("type") == "tool_result" for block in blocks):
                users, calls = users + 1, 0
        elif message.get("role") == "assistant":
            calls += sum(1 for block in blocks if block.get("type") == "tool_use")
    return users, calls


def chat_completion(body: dict[str, Any]) -> dict[str, Any]:
    """The Chat Completions answer to `body`."""
    scenario, turn, calls = _due(body, _chat_position(body))
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{stem}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for stem, call in calls
        ]
    else:
        message["content"] = scenario.final_text
    prompt_tokens, completion_tokens = usage_for(turn)
    return {
        "id": f"chatcmpl-{scenario.name}-{turn}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model", "")),
        "system_fingerprint": "fp_scripted",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def response(body: dict[str, Any]) -> dict[str, Any]:
    """The Responses API answer to `body`."""
    scenario, turn, calls = _due(body, _responses_position(body))
    output: list[dict[str, Any]]
    if calls:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{stem}",
                "call_id": f"call_{stem}",
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
            for stem, call in calls
        ]
    else:
        output = [
            {
                "type": "message",
                "id": f"msg_{scenario.name}_{turn}",
                "role": "assistant",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": scenario.final_text, "annotations": []}
                ],
            }
        ]
    input_tokens, output_tokens = usage_for(turn)
    return {
        "id": f"resp_{scenario.name}_{turn}",
        "object": "response",
        "created_at": time.time(),
        "status": "completed",
        "model": str(body.get("model", "")),
        "output": output,
        "instructions": body.get("instructions"),
        "tools": body.get("tools") or [],
        "tool_choice": body.get("tool_choice") or "auto",
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "temperature": 1.0,
        "top_p": 1.0,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": {},
        "error": None,
        "incomplete_details": None,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }


def message(body: dict[str, Any]) -> dict[str, Any]:
    """The Anthropic Messages answer to `body`."""
    scenario, turn, calls = _due(body, _anthropic_position(body))
    content = [
        {
            "type": "tool_use",
            "id": f"toolu_{stem}",
            "name": call.name,
            "input": dict(call.arguments),
        }
        for stem, call in calls
    ] or [{"type": "text", "text": scenario.final_text}]
    input_tokens, output_tokens = usage_for(turn)
    return {
        "id": f"msg_{scenario.name}_{turn}",
        "type": "message",
        "role": "assistant",
        "model": str(body.get("model", "")),
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        },
    }


def app(requests: list[tuple[str, str]] | None = None) -> FastAPI:
    """The FastAPI application; appends (path, case or error) of each request to `requests`."""
    try:  # FastAPI >= 0.150 traces itself: keep its spans out of the recordings
        application = FastAPI(telemetry={"tracing": False, "metrics": False, "logs": False})
    except TypeError:
        application = FastAPI()
    answers = {
        "/v1/chat/completions": chat_completion,
        "/v1/responses": response,
        "/v1/messages": message,
    }

    async def answer(request: Request) -> JSONResponse:
        path = request.url.path
        body = await request.json()
        try:
            if not isinstance(body, dict):
                raise ScriptError("the body is not a JSON object")
            if body.get("stream"):
                raise ScriptError("this scripted server does not stream")
            result = answers[path](body)
        except ScriptError as error:
            if requests is not None:
                requests.append((path, f"error: {error}"))
            if path == "/v1/messages":
                detail = {"type": "invalid_request_error", "message": str(error)}
                return JSONResponse({"type": "error", "error": detail}, status_code=400)
            detail = {"message": str(error), "type": "invalid_request_error", "code": "400"}
            return JSONResponse({"error": detail}, status_code=400)
        if requests is not None:
            requests.append((path, _case_name(body)))
        return JSONResponse(result)

    for path in answers:
        application.add_api_route(path, answer, methods=["POST"])
    return application


class ModelServer:
    """The server running in a background thread; `url` is its root (`http://127.0.0.1:PORT`)."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[tuple[str, str]] = []
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def openai_base_url(self) -> str:
        """The base URL an OpenAI client takes."""
        return f"{self.url}/v1"

    def start(self) -> ModelServer:
        """Start serving on a free port; returns self once it accepts requests."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
        config = uvicorn.Config(
            app(self.requests),
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="model-server", daemon=True
        )
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                sock.close()
                raise RuntimeError("the scripted model server did not start")
            time.sleep(0.01)
        self._server, self._thread, self._sock = server, thread, sock
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        """Stop serving."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()


@contextmanager
def running_model_server() -> Iterator[ModelServer]:
    """A started `ModelServer`, stopped on exit."""
    server = ModelServer().start()
    try:
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    with running_model_server() as running:
        print(running.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
