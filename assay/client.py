"""A Python client of `assay serve`: what CI and dashboards call instead of curl, jq and SSE
parsing by hand.

    from assay.client import AssayClient
    client = AssayClient()                      # ASSAY_URL, ASSAY_TOKEN
    result = client.run("support-bot", outputs=rows, subject="agent:support-bot@v2")
    accepted = client.run("support-bot", outputs=rows, subject="agent:bot@v3", wait=False)
    for event in client.events(accepted.run_id):   # follows it live, reconnecting
        ...

Every error the service answers raises `AssayAPIError` with `.status` and `.problem` (the RFC
9457 body); a service that cannot be reached raises it with `status` None. Importing this module
imports neither Prefect nor the service's own modules (their models are imported when a call
returns one), so a CI job needs only httpx and the URL.
"""

from __future__ import annotations

import json
import os
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, TypeVar

import httpx

if TYPE_CHECKING:
    from pydantic import BaseModel

    from assay.gate.decision import GateReport
    from assay.gate.overrides import GateCheck
    from assay.runs.cases import CaseResult
    from assay.runs.records import EvalResult, RunState

DEFAULT_TIMEOUT_SECONDS: Final = 600.0
"""A waited-for run answers when it ends; `wait=False` and `events` need no long timeout."""
RECONNECTS: Final = 5
"""How often `events` reconnects (with `Last-Event-ID`) after a dropped stream, in a row."""
PREFER_ASYNC: Final = {"Prefer": "respond-async"}
Submitted = TypeVar("Submitted", bound="BaseModel")


class AssayAPIError(Exception):
    """An error answer of the service (`status`, and the problem+json body as `problem`), or a
    service that could not be reached (`status` None)."""

    def __init__(self, status: int | None, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.problem = dict(problem)
        super().__init__(self.detail)

    @property
    def detail(self) -> str:
        """The problem's one-line `detail` (else its title)."""
        return str(self.problem.get("detail") or self.problem.get("title") or "error")


def _problem_of(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return body
    return {"status": response.status_code, "title": response.reason_phrase, "detail": ""}


def _tls(url: str) -> ssl.SSLContext | bool:
    """A plain-http service needs no CA bundle (the client follows no redirect), and loading one
    is 20–40 ms of a short CLI call: its TLS context verifies and trusts no certificate, so TLS
    it meets (an https proxy) fails closed. An https service gets httpx's default verification."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT) if url.startswith("http://") else True


class AssayClient:
    """A synchronous client of one Assay service (`url`, default `$ASSAY_URL`) with a bearer
    token (`token`, default `$ASSAY_TOKEN`)."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base = url or os.environ.get("ASSAY_URL")
        if not base:
            raise ValueError("no service URL: pass url= or set ASSAY_URL")
        token = token or os.environ.get("ASSAY_TOKEN")
        self.url = base.rstrip("/")
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=timeout,
            transport=transport,
            verify=_tls(self.url),
        )

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> AssayClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise AssayAPIError(
                None, {"title": "unreachable", "detail": f"cannot reach {self.url}: {exc}"}
            ) from None
        if response.is_error:
            raise AssayAPIError(response.status_code, _problem_of(response))
        return response

    def _pages(self, path: str, params: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        query = {name: value for name, value in params.items() if value is not None}
        while True:
            page = self._request("GET", path, params=query).json()
            yield from page["items"]
            if page["next_cursor"] is None:
                return
            query["cursor"] = page["next_cursor"]

    # Suites

    def publish_suite(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Publish a suite document: `{suite, version, content_hash, published_at, cases,
        created}` (`created` False when identical to the latest version)."""
        response = self._request("POST", "/suites", json=dict(document))
        published: dict[str, Any] = response.json()
        return published

    # Runs

    def _submit(
        self, path: str, answer: Callable[[], type[Submitted]], fields: Mapping[str, Any]
    ) -> Submitted | RunState:
        """POST a run request (`fields`: a method's arguments — the body's fields, `wait` and
        `idempotency_key`): the route's answer as the model `answer()` gives, or the accepted
        run when not waited for. The model is imported once the answer is in: a caller may load
        it meanwhile (the command line does)."""
        body = {
            name: value
            for name, value in fields.items()
            if value is not None and name not in ("self", "wait", "idempotency_key")
        }
        if body.get("outputs") is not None:
            body["outputs"] = [dict(row) for row in body["outputs"]]
        key = fields["idempotency_key"]
        headers = {
            **({} if fields["wait"] else PREFER_ASYNC),
            **({"Idempotency-Key": key} if key else {}),
        }
        response = self._request("POST", path, json=body, headers=headers)
        if response.status_code == 202:
            return _run_state(response.json())
        return answer().model_validate(response.json())

    def run(
        self,
        suite: str,
        *,
        subject: str,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        outputs_uri: str | None = None,
        baseline: str | None = None,
        sample: int | None = None,
        seed: int | None = None,
        judge_block: str | None = None,
        fresh_judge: bool | None = None,
        idempotency_key: str | None = None,
        wait: bool = True,
    ) -> EvalResult | RunState:
        """Run a published suite (`NAME[@VERSION]`) on inline `outputs` (rows of the outputs
        format) or `outputs_uri`: the EvalResult once it ends, or with `wait=False` the
        accepted run (`run_id`, `status`) at once — follow it with `events`."""
        return self._submit("/runs", _eval_result, locals())

    def gate(
        self,
        suite: str,
        *,
        subject: str,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        outputs_uri: str | None = None,
        baseline: str | None = None,
        sample: int | None = None,
        seed: int | None = None,
        judge_block: str | None = None,
        idempotency_key: str | None = None,
        wait: bool = True,
    ) -> GateReport | RunState:
        """Run the gate: its report (verdict, reasons, rules, the EvalResult), or with
        `wait=False` the accepted run; its decision is then `gate_check(run_id)`."""
        return self._submit("/gate", _gate_report, locals())

    def gate_check(self, run_id: str) -> GateCheck:
        """A gate run's recorded and effective verdict (after governed overrides)."""
        from assay.gate.overrides import GateCheck

        return GateCheck.model_validate(self._request("GET", f"/gates/{run_id}").json())

    def answer(self, path: str) -> Any:
        """The JSON the service answers to `GET path`, as sent: nothing is parsed into Assay's
        models, whose import costs a short-lived client more than the call (the command line's
        `--json` in client mode prints it)."""
        return self._request("GET", path).json()

    def result(self, run_id: str) -> EvalResult | RunState:
        """A run's EvalResult once completed, else its state (queued or running)."""
        response = self._request("GET", f"/runs/{run_id}")
        if response.status_code == 202:
            return _run_state(response.json())
        from assay.runs.records import EvalResult

        return EvalResult.model_validate(response.json())

    def runs(self, suite: str | None = None, subject: str | None = None) -> list[dict[str, Any]]:
        """Recorded runs (their aggregates), newest first."""
        return list(self._pages("/runs", {"suite": suite, "subject": subject}))

    def cases(self, run_id: str, status: str | None = None) -> list[CaseResult]:
        """Each case of a completed run (`status`: passed, failed, skipped or error)."""
        from assay.runs.cases import CaseResult

        pages = self._pages(f"/runs/{run_id}/cases", {"status": status, "limit": 500})
        return [CaseResult.model_validate(item) for item in pages]

    def events(self, run_id: str, last_event_id: str | None = None) -> Iterator[dict[str, Any]]:
        """The run's Server-Sent Events as `{"event", "id", "data"}` (`data` parsed JSON):
        `case`, `progress`, then `summary` (or `error`), following a live run; a dropped
        stream is resumed with `Last-Event-ID`, so each case comes once."""
        last = last_event_id
        failures = 0
        while True:
            headers = {"Last-Event-ID": last} if last is not None else {}
            try:
                with self._http.stream(
                    "GET", f"/runs/{run_id}/events", headers=headers, timeout=None
                ) as response:
                    if response.is_error:
                        response.read()
                        raise AssayAPIError(response.status_code, _problem_of(response))
                    for event in _sse(response.iter_lines()):
                        failures = 0
                        if event["id"] is not None:
                            last = event["id"]
                        yield event
                        if event["event"] in ("summary", "error"):
                            return
            except httpx.TransportError as exc:
                failures += 1
                if failures > RECONNECTS:
                    raise AssayAPIError(
                        None, {"title": "unreachable", "detail": f"event stream lost: {exc}"}
                    ) from None
                time.sleep(min(2.0, 0.2 * 2**failures))
                continue
            return  # the service closed the stream without a summary: nothing more will come

    # Baselines, scorecards, findings

    def baselines(self, suite: str, subject: str, variant: str | None = None) -> dict[str, Any]:
        """The pinned baseline of a suite and subject: `{suite, subject, pinned}`."""
        params = {"suite": suite, "subject": subject, "variant": variant}
        query = {name: value for name, value in params.items() if value is not None}
        pinned: dict[str, Any] = self._request("GET", "/baselines", params=query).json()
        return pinned

    def pin_baseline(self, run_id: str) -> dict[str, Any]:
        """Pin a run as the baseline of its suite and subject."""
        pinned: dict[str, Any] = self._request("POST", "/baselines", json={"run_id": run_id}).json()
        return pinned

    def scorecards(
        self, subject: str | None = None, suite: str | None = None, last: int | None = None
    ) -> list[dict[str, Any]]:
        """Scorecard rows (as `assay scorecard --json`)."""
        params = {"subject": subject, "suite": suite, "last": last, "format": "json"}
        query = {name: value for name, value in params.items() if value is not None}
        rows: list[dict[str, Any]] = self._request("GET", "/scorecards", params=query).json()
        return rows

    def findings(
        self,
        suite: str | None = None,
        subject: str | None = None,
        kind: str | None = None,
        since: str | None = None,
    ) -> list[dict[str, Any]]:
        """Findings, newest first."""
        params = {"suite": suite, "subject": subject, "kind": kind, "since": since}
        return list(self._pages("/findings", params))


def _eval_result() -> type[EvalResult]:
    from assay.runs.records import EvalResult

    return EvalResult


def _gate_report() -> type[GateReport]:
    from assay.gate.decision import GateReport

    return GateReport


def _run_state(body: Any) -> RunState:
    from assay.runs.records import RunState

    return RunState.model_validate(body)


def _sse(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Server-Sent Events from a stream's lines (the subset the service sends: `event`, `id`,
    one `data` line)."""
    event: dict[str, Any] = {"event": "message", "id": None, "data": None}
    for line in lines:
        if not line:
            if event["data"] is not None:
                yield event
            event = {"event": "message", "id": None, "data": None}
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event["event"] = value
        elif name == "id":
            event["id"] = value
        elif name == "data":
            event["data"] = json.loads(value)
