"""A Python client of `assay serve`: what CI and dashboards call instead of curl, jq and SSE
parsing by hand.

    from assay.client import AssayClient
    client = AssayClient()                      # ASSAY_URL, ASSAY_TOKEN, ASSAY_TIMEOUT
    result = client.run("support-bot", outputs=rows, subject="agent:support-bot@v2")
    accepted = client.run("support-bot", outputs=rows, subject="agent:bot@v3", wait=False)
    for event in client.events(accepted.run_id):   # follows it live, reconnecting
        ...

Every error the service answers raises `AssayAPIError` with `.status` and `.problem` (the RFC
9457 body); so, with `status` None, does a service that cannot be reached, one that does not
answer within the timeout, and an answer that is not Assay's (a proxy's login page, another
server on that port). Importing this module imports neither Prefect nor the service's own
modules (their models are imported when a call returns one), so a CI job needs only httpx and
the URL.
"""

from __future__ import annotations

import math
import os
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

import httpx

from assay.answers import (
    Answer,
    AssayAPIError,
    Model,
    answer_of,
    answer_source,
    is_alive,
    is_list,
    is_object,
    is_page,
    is_published,
    media_type,
    not_assay,
    sse_events,
    validated,
)
from assay.errors import shown

if TYPE_CHECKING:
    from assay.gate.decision import GateReport
    from assay.gate.overrides import GateCheck
    from assay.runs.cases import CaseResult
    from assay.runs.cost_plan import CostPlan
    from assay.runs.records import EvalResult, RunState

DEFAULT_TIMEOUT_SECONDS: Final = 60.0
"""How long the client waits for any read — an answer, or the next bytes of an event stream —
unless `timeout` or `$ASSAY_TIMEOUT` says otherwise: above the store's own 30 s deadline, so a
store that does not answer is the service's 503 rather than a client that gave up first."""
TIMEOUT_ENV: Final = "ASSAY_TIMEOUT"
WAIT_TIMEOUT_SECONDS: Final = 600.0
"""How long a waited-for run (`run` or `gate` with `wait=True`) may take: the service answers
when the run ends. A longer run: `wait=False`, then `events`."""
RECONNECTS: Final = 5
"""How often in a row `events` resumes (with `Last-Event-ID`) a stream that dropped, sent
nothing for `timeout` or ended without a summary, before it gives up."""
PREFER_ASYNC: Final = {"Prefer": "respond-async"}
EVENT_STREAM: Final = "text/event-stream"


def _service_url(url: str) -> str:
    """`url` without a trailing slash; ValueError, one line, unless it is an http(s) URL with
    a host and a valid port."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        reason = str(exc)
    else:
        if parsed.scheme not in ("http", "https"):
            reason = "not http:// or https://"
        elif not parsed.host:
            reason = "no host"
        elif parsed.port is not None and not 0 < parsed.port < 65536:
            reason = f"port {parsed.port} is out of range"
        else:
            return url.rstrip("/")
    raise ValueError(f"invalid service URL {shown(url)}: {reason}; expected http(s)://HOST[:PORT]")


def _timeout(seconds: float | None) -> float:
    """`seconds`, else `$ASSAY_TIMEOUT`, else the default; ValueError, one line, for an
    `$ASSAY_TIMEOUT` that is not a number of seconds above 0."""
    if seconds is not None:
        return seconds
    text = os.environ.get(TIMEOUT_ENV)
    if not text:
        return DEFAULT_TIMEOUT_SECONDS
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not 0 < seconds < math.inf:
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds above 0, not {shown(text)}")
    return seconds


def _tls(url: str) -> ssl.SSLContext | bool:
    """A plain-http service needs no CA bundle (the client follows no redirect), and loading one
    is 20–40 ms of a short CLI call: its TLS context verifies and trusts no certificate, so TLS
    it meets (an https proxy) fails closed. An https service gets httpx's default verification."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT) if url.startswith("http://") else True


_NOT_IN_BODY: Final = ("self", "wait", "idempotency_key", "gate", "options")
"""A run method's own arguments, never sent as the request body's fields."""


def _body(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A run request's body from a method's arguments (`locals()`): its fields and its
    `options`, less the method's own and those left None."""
    given = {**arguments, **arguments["options"]}
    body = {
        name: value
        for name, value in given.items()
        if value is not None and name not in _NOT_IN_BODY
    }
    if body.get("outputs") is not None:
        body["outputs"] = [dict(row) for row in body["outputs"]]
    return body


def _segment(value: str) -> str:
    """`value` as one path segment: `../suites` or a newline stays inside it, never a path of
    its own or a request httpx refuses."""
    return quote(value, safe="")


class AssayClient:
    """A synchronous client of one Assay service (`url`, default `$ASSAY_URL`) with a bearer
    token (`token`, default `$ASSAY_TOKEN`).

    `timeout` (default `$ASSAY_TIMEOUT`, else 60 s) bounds connecting, sending and every read:
    each answer, and on an event stream the wait for its next bytes. The one answer it cannot
    bound is a waited-for run's, which comes when the run ends: that is bounded by
    `wait_timeout`, and asked only of a service that has answered this client (else its
    `/livez` first, within `timeout`), so a service that never answers is given up on
    after `timeout` whatever the call."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        timeout: float | None = None,
        wait_timeout: float = WAIT_TIMEOUT_SECONDS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        base = url or os.environ.get("ASSAY_URL")
        if not base:
            raise ValueError("no service URL: pass url= or set ASSAY_URL")
        token = token or os.environ.get("ASSAY_TOKEN")
        self.url = _service_url(base)
        self.timeout = _timeout(timeout)
        self.wait_timeout = wait_timeout
        self._answered = False
        self._http = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token}"} if token else {},
            timeout=self.timeout,
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

    def _unanswered(self, method: str, path: str, exc: httpx.RequestError, seconds: float) -> str:
        """What went wrong when no answer came (`seconds`: the read timeout)."""
        if isinstance(exc, httpx.ReadTimeout):
            return f"no answer from {self.url} within {seconds:g} s ({method} {path})"
        if isinstance(exc, httpx.TimeoutException):
            return f"no answer from {self.url} within {self.timeout:g} s ({method} {path})"
        return f"cannot reach {self.url}: {exc}"

    def _checked(self, response: httpx.Response, content: bytes) -> Answer:
        """Assay's JSON answer in `response`; AssayAPIError for an error answer (its problem)
        or an answer that is not Assay's."""
        answer = answer_of(response, content)
        self._answered = True
        if response.is_error:
            raise AssayAPIError(response.status_code, answer.expect(is_object, "a problem"))
        return answer

    def _request(self, method: str, path: str, *, waited: bool = False, **kwargs: Any) -> Answer:
        """Send one request; `waited`: a waited-for run, whose answer may take `wait_timeout`."""
        read = self.wait_timeout if waited else self.timeout
        try:
            response = self._http.request(
                method, path, timeout=httpx.Timeout(self.timeout, read=read), **kwargs
            )
        except httpx.RequestError as exc:
            detail = self._unanswered(method, path, exc, read)
            raise AssayAPIError(None, {"title": "unreachable", "detail": detail}) from None
        return self._checked(response, response.content)

    def _pages(self, path: str, params: Mapping[str, Any]) -> Iterator[Answer]:
        query = {name: value for name, value in params.items() if value is not None}
        while True:
            page = self._request("GET", path, params=query)
            body = page.expect(is_page, "a page of items")
            yield page
            if body["next_cursor"] is None:
                return
            query["cursor"] = body["next_cursor"]

    # Suites

    def publish_suite(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Publish a suite document: `{suite, version, content_hash, published_at, cases,
        created}` (`created` False when identical to the latest version)."""
        answer = self._request("POST", "/suites", json=dict(document))
        published: dict[str, Any] = answer.expect(is_published, "a published suite")
        return published

    # Runs

    def _submit(
        self, path: str, answer: Callable[[], type[Model]], fields: Mapping[str, Any]
    ) -> Model | RunState:
        """POST a run request (`fields`: a method's arguments — the body's fields, `wait` and
        `idempotency_key`): the route's answer as the model `answer()` gives, or the accepted
        run when not waited for. The model is imported once the answer is in: a caller may load
        it meanwhile (the command line does). A waited-for run is asked only of a service that
        has answered this client: else its `/livez` first (which answers at once, probing
        nothing)."""
        body = _body(fields)
        key = fields["idempotency_key"]
        waited = fields["wait"]
        headers = {
            **({} if waited else PREFER_ASYNC),
            **({"Idempotency-Key": key} if key else {}),
        }
        if waited and not self._answered:
            self._request("GET", "/livez").expect(is_alive, "Assay's liveness")
        answered = self._request("POST", path, json=body, headers=headers, waited=waited)
        if answered.status == 202:
            return answered.model(_run_state())
        return answered.model(answer())

    def run(
        self,
        suite: str,
        *,
        subject: str,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        outputs_uri: str | None = None,
        idempotency_key: str | None = None,
        wait: bool = True,
        **options: Any,
    ) -> EvalResult | RunState:
        """Run a published suite (`NAME[@VERSION]`) on inline `outputs` (rows of the outputs
        format) or `outputs_uri`: the EvalResult once it ends, or with `wait=False` the
        accepted run (`run_id`, `status`) at once — follow it with `events`.

        `options`: any run option the service takes (`sample`, `seed`, `baseline`,
        `judge_block`, `fresh_judge`, `judge_repeats`, `outputs_format`, …: the `POST /runs`
        schema, derived from `RunOptions`); one it does not take is its 422."""
        return self._submit("/runs", _eval_result, locals())

    def gate(
        self,
        suite: str,
        *,
        subject: str,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        outputs_uri: str | None = None,
        idempotency_key: str | None = None,
        wait: bool = True,
        **options: Any,
    ) -> GateReport | RunState:
        """Run the gate: its report (verdict, reasons, rules, the EvalResult), or with
        `wait=False` the accepted run; its decision is then `gate_check(run_id)`. `options` as
        `run` takes them, and the gate's own (`max_judge_flip_rate`)."""
        return self._submit("/gate", _gate_report, locals())

    def plan(
        self,
        suite: str,
        *,
        subject: str,
        outputs: Sequence[Mapping[str, Any]] | None = None,
        outputs_uri: str | None = None,
        gate: bool = False,
        **options: Any,
    ) -> CostPlan:
        """The cost plan of the run `run` (or, with `gate`, `gate`) would start with these
        arguments — judge calls after cache hits, tokens, cost sync and batch, each budget's
        headroom, whether it would be blocked — with no judge called and nothing run
        (`POST /runs?plan=true`)."""
        body = _body(locals())
        from assay.runs.cost_plan import CostPlan

        path = "/gate" if gate else "/runs"
        return self._request("POST", path, params={"plan": "true"}, json=body).model(CostPlan)

    def gate_check(self, run_id: str) -> GateCheck:
        """A gate run's recorded and effective verdict (after governed overrides)."""
        from assay.gate.overrides import GateCheck

        return self._request("GET", f"/gates/{_segment(run_id)}").model(GateCheck)

    def answer(self, path: str) -> Any:
        """The JSON the service answers to `GET path`, as sent: nothing is parsed into Assay's
        models, whose import costs a short-lived client more than the call (the command line's
        `--json` in client mode prints it)."""
        return self._request("GET", path).body

    def report(self, run_id: str) -> str:
        """A run's HTML report page (as `assay report RUN_ID` writes it)."""
        read = httpx.Timeout(self.timeout)
        path = f"/runs/{_segment(run_id)}/report"
        try:
            response = self._http.request("GET", path, timeout=read)
        except httpx.RequestError as exc:
            detail = self._unanswered("GET", path, exc, self.timeout)
            raise AssayAPIError(None, {"title": "unreachable", "detail": detail}) from None
        if response.is_success and media_type(response) == "text/html":
            self._answered = True
            return response.text
        self._checked(response, response.content)  # the service's problem, or not Assay's
        raise not_assay(f"{answer_source(response)}, not a report page")

    def result(self, run_id: str) -> EvalResult | RunState:
        """A run's EvalResult once completed, else its state (queued or running)."""
        answer = self._request("GET", f"/runs/{_segment(run_id)}")
        return answer.model(_run_state() if answer.status == 202 else _eval_result())

    def runs(self, suite: str | None = None, subject: str | None = None) -> list[dict[str, Any]]:
        """Recorded runs (their aggregates), newest first."""
        pages = self._pages("/runs", {"suite": suite, "subject": subject})
        return [run for page in pages for run in page.body["items"]]

    def cases(self, run_id: str, status: str | None = None) -> list[CaseResult]:
        """Each case of a completed run (`status`: passed, failed, skipped or error); a
        conversation's carries its verdict per turn (`CaseResult.turns`)."""
        from assay.runs.cases import CaseResult

        pages = self._pages(f"/runs/{_segment(run_id)}/cases", {"status": status, "limit": 500})
        return [
            validated(CaseResult, item, page.source)
            for page in pages
            for item in page.body["items"]
        ]

    def events(self, run_id: str, last_event_id: str | None = None) -> Iterator[dict[str, Any]]:
        """The run's Server-Sent Events as `{"event", "id", "data"}` (`data` parsed JSON):
        `case`, `progress`, then `summary` (or `error`), following a live run. A stream that
        drops, sends nothing for `timeout` or ends without a summary is resumed with
        `Last-Event-ID` (so each case comes once), up to `RECONNECTS` times in a row; a first
        connection that fails raises at once, as any other call."""
        path = f"/runs/{_segment(run_id)}/events"
        last = last_event_id
        opened = False
        reconnects = 0
        while True:
            headers = {"Last-Event-ID": last} if last is not None else {}
            try:
                with self._http.stream("GET", path, headers=headers) as response:
                    self._opened(response)
                    opened = True
                    for event in sse_events(response.iter_lines(), answer_source(response)):
                        reconnects = 0
                        if event["id"] is not None:
                            last = event["id"]
                        yield event
                        if event["event"] in ("summary", "error"):
                            return
                lost = f"{self.url}{path} ended without a summary"
            except httpx.RequestError as exc:
                lost = self._unanswered("GET", path, exc, self.timeout)
                if not opened:
                    raise AssayAPIError(None, {"title": "unreachable", "detail": lost}) from None
            if reconnects == RECONNECTS:
                lost = f"event stream lost after {RECONNECTS} reconnects: {lost}"
                raise AssayAPIError(None, {"title": "event stream lost", "detail": lost})
            reconnects += 1
            time.sleep(min(2.0, 0.2 * 2**reconnects))

    def _opened(self, response: httpx.Response) -> None:
        """Return if `response` opened an event stream; else raise AssayAPIError: the service's
        problem, or an answer that is not Assay's."""
        if response.is_success and media_type(response) == EVENT_STREAM:
            return
        answer = self._checked(response, response.read())
        raise not_assay(f"{answer.source}, not an event stream")

    # Baselines, scorecards, findings

    def baselines(self, suite: str, subject: str, variant: str | None = None) -> dict[str, Any]:
        """The pinned baseline of a suite and subject: `{suite, subject, pinned}`."""
        params = {"suite": suite, "subject": subject, "variant": variant}
        query = {name: value for name, value in params.items() if value is not None}
        answer = self._request("GET", "/baselines", params=query)
        pinned: dict[str, Any] = answer.expect(is_object, "a JSON object")
        return pinned

    def pin_baseline(self, run_id: str) -> dict[str, Any]:
        """Pin a run as the baseline of its suite and subject."""
        answer = self._request("POST", "/baselines", json={"run_id": run_id})
        pinned: dict[str, Any] = answer.expect(is_object, "a JSON object")
        return pinned

    def scorecards(
        self, subject: str | None = None, suite: str | None = None, last: int | None = None
    ) -> list[dict[str, Any]]:
        """Scorecard rows (as `assay scorecard --json`)."""
        params = {"subject": subject, "suite": suite, "last": last, "format": "json"}
        query = {name: value for name, value in params.items() if value is not None}
        answer = self._request("GET", "/scorecards", params=query)
        rows: list[dict[str, Any]] = answer.expect(is_list, "a JSON list")
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
        return [
            finding for page in self._pages("/findings", params) for finding in page.body["items"]
        ]


def _eval_result() -> type[EvalResult]:
    from assay.runs.records import EvalResult

    return EvalResult


def _gate_report() -> type[GateReport]:
    from assay.gate.decision import GateReport

    return GateReport


def _run_state() -> type[RunState]:
    from assay.runs.records import RunState

    return RunState
