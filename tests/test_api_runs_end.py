"""Every run `assay serve` shows ends in a state that is true (issue 34, item 1).

- A CLI run killed mid-way is `interrupted` (the CLI's own rule: its process is gone), and every
  client following its event stream gets a final `error` frame and the stream closes.
- A run of the service's own that fails because the store refuses writes mid-run (a full disk,
  played by `RLIMIT_FSIZE` 0 on the service process: every write of a file fails, reads work) is
  `failed` with the reason, although its aggregate in the store still says `running` — the
  asynchronous run and the waited-for one (whose run id is its flow run's).
- After `kill -9` of the service, every run it had accepted answers a true state — the one that
  was running and the ones still queued `interrupted` ("submit the run again"), the one that had
  failed `failed` as before — and each one's Idempotency-Key replays that state.

`assay serve` runs as a real process on the session's Prefect API; every call goes over loopback
with httpx; the judge is the scripted test server, slow so runs are caught mid-way.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import httpx
from httpx_sse import ServerSentEvent, connect_sse
from prefect.client.orchestration import get_client

from assay.runs.records import RunStatus, load_aggregate
from assay.store import FileStore
from tests.api_service import Service, start_service
from tests.judge_server import JudgeServer, slow
from tests.servers import BIN

SUITE = "ended"
CASES: list[dict[str, Any]] = [
    {"id": f"c{i:02d}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Polite?"}}]}
    for i in range(6)
]


def _outputs(text: str) -> list[dict[str, str]]:
    """Each case its own output: one judge call each (the same text would share a verdict)."""
    return [{"case_id": case["id"], "output": f"{text}, {case['id']}"} for case in CASES]


OUTPUTS = _outputs("yes")
PREFER_ASYNC = {"Prefer": "respond-async"}
TRUE_WITHIN_SECONDS = 10.0
FOLLOWERS = 50


def _publish(service: Service) -> None:
    with service.client("operator") as client:
        published = client.post("/suites", json={"suite": SUITE, "cases": CASES})
        assert published.status_code == 201, published.text


def _body(subject: str, outputs: list[dict[str, str]] = OUTPUTS) -> dict[str, Any]:
    return {"suite": SUITE, "subject": subject, "outputs": outputs}


def _running(store: FileStore, known: frozenset[str] = frozenset()) -> str:
    """The id of a run (not in `known`) whose aggregate says `running`."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for key in store.list("index/runs/"):
            run_id = key.removeprefix("index/runs/").removesuffix(".json")
            if run_id not in known and load_aggregate(store, run_id).status is RunStatus.RUNNING:
                return run_id
        time.sleep(0.2)
    raise AssertionError("the run never started")


def _judged(judge: JudgeServer, count: int) -> None:
    """Wait until the judge has received `count` requests (the run is mid-way)."""
    deadline = time.monotonic() + 120
    while len(judge.requests) < count:
        assert time.monotonic() < deadline, "the run never called its judge"
        time.sleep(0.1)


def _answer(client: httpx.Client, run_id: str) -> tuple[httpx.Response, float]:
    """`GET /runs/{id}` polled until it stops answering 202; the answer and when it came."""
    deadline = time.monotonic() + 60
    while (shown := client.get(f"/runs/{run_id}")).status_code == 202:
        assert time.monotonic() < deadline, f"run {run_id} is {shown.json()['status']} for ever"
        time.sleep(0.1)
    return shown, time.monotonic()


@dataclass
class Follower:
    """One client following a run's event stream until the service closes it."""

    connected: threading.Event = field(default_factory=threading.Event)
    last: ServerSentEvent | None = None
    closed_at: float | None = None
    error: BaseException | None = None

    def follow(self, service: Service, run_id: str) -> None:
        try:
            with (
                service.client("viewer") as client,
                connect_sse(client, "GET", f"/runs/{run_id}/events") as source,
            ):
                assert source.response.status_code == 200, source.response.text
                self.connected.set()
                for event in source.iter_sse():
                    self.last = event
            self.closed_at = time.monotonic()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.connected.set()


@contextmanager
def _followers(service: Service, run_id: str, count: int) -> Iterator[list[Follower]]:
    """`count` clients following the run's events, all connected when this yields."""
    followers = [Follower() for _ in range(count)]
    threads = [
        threading.Thread(target=one.follow, args=(service, run_id), daemon=True)
        for one in followers
    ]
    for thread in threads:
        thread.start()
    for one in followers:
        assert one.connected.wait(60), "a follower never connected"
        assert one.error is None, one.error
    yield followers
    for thread in threads:
        thread.join(60)


def _told(followers: list[Follower], status: str, since: float) -> float:
    """Assert every stream ended with a final `error` frame saying `status`; the slowest one's
    seconds after `since`."""
    for one in followers:
        assert one.error is None, one.error
        assert one.closed_at is not None, "a stream never closed"
        assert one.last is not None and one.last.event == "error", one.last
        assert json.loads(one.last.data)["status"] == status, one.last.data
    return max(one.closed_at for one in followers if one.closed_at is not None) - since


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    return body


def test_a_killed_cli_run_is_interrupted_and_its_followers_told_within_10s(
    tmp_path: Path, prefect_api: str, judge_env: JudgeServer
) -> None:
    judge_env.script(default=slow(300))
    service = start_service(tmp_path, prefect_api_url=prefect_api)
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text("".join(json.dumps(line) + "\n" for line in OUTPUTS))
    cli = None
    try:
        _publish(service)
        store = FileStore(service.store_dir)
        command = [str(BIN / "assay"), "run", SUITE, "--outputs", str(outputs)]
        command += ["--subject", "agent:cli", "--store", store.uri]
        env = {**os.environ, "PREFECT_API_URL": prefect_api}
        cli = subprocess.Popen(
            command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        run_id = _running(store)
        with service.client("viewer") as client:
            assert client.get(f"/runs/{run_id}").json()["status"] == "running"
            with _followers(service, run_id, FOLLOWERS) as followers:
                cli.send_signal(signal.SIGKILL)
                killed_at = time.monotonic()
                cli.wait()
                shown, answered_at = _answer(client, run_id)
            listed = client.get("/runs").json()["items"]
    finally:
        if cli is not None and cli.poll() is None:
            cli.kill()
        service.stop()
    interrupted = _problem(shown, 409)
    assert interrupted["run_status"] == "interrupted"
    assert "is gone" in interrupted["detail"] and f"--resume {run_id}" in interrupted["detail"]
    assert [run["status"] for run in listed if run["run_id"] == run_id] == ["interrupted"]
    assert load_aggregate(store, run_id).status is RunStatus.RUNNING  # nothing was written
    answered = answered_at - killed_at
    closed = _told(followers, "interrupted", killed_at)
    print(
        f"killed CLI run: interrupted {answered:.2f} s, {FOLLOWERS} streams closed {closed:.2f} s"
    )
    assert answered < TRUE_WITHIN_SECONDS and closed < TRUE_WITHIN_SECONDS


@contextmanager
def _writes_refused(pid: int) -> Iterator[float]:
    """The process `pid` can write no byte to any file (as on a full disk) inside this block;
    yields when that began."""
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (0, hard))
    try:
        yield time.monotonic()
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))


@dataclass
class Failed:
    """How a run that failed mid-run was answered."""

    problem: dict[str, Any]
    answered: float
    """Seconds from the refusal of writes to `GET /runs/{id}` answering `failed`."""
    closed: float
    """Seconds from the refusal of writes to the last of its event streams closing."""
    answered_at: datetime


def _failed_mid_run(service: Service, run_id: str, judge: JudgeServer, judged: int) -> Failed:
    """Refuse the service's writes once the run has made `judged` judge calls (so it is
    mid-way); how its state and its streams then said it failed."""
    _judged(judge, judged)
    with (
        service.client("viewer") as client,
        _followers(service, run_id, 5) as followers,
        _writes_refused(service.process.pid) as refused_at,
    ):
        shown, answered_at = _answer(client, run_id)
        answered_wall = datetime.now(UTC)
    closed = _told(followers, "failed", refused_at)
    return Failed(_problem(shown, 409), answered_at - refused_at, closed, answered_wall)


def test_a_service_run_that_fails_on_a_full_disk_is_failed_and_its_followers_told_within_10s(
    tmp_path: Path, prefect_api: str, judge_env: JudgeServer
) -> None:
    judge_env.script(default=slow(4))
    service = start_service(tmp_path, prefect_api_url=prefect_api)
    store = FileStore(service.store_dir)
    waited: list[httpx.Response] = []

    def wait_for_run() -> None:
        with service.client("operator") as client:
            # Other outputs: none of its verdicts is the first run's, which its judge calls, left
            # running when the run failed, cached once writes were taken again.
            waited.append(client.post("/runs", json=_body("agent:waited", _outputs("sure"))))

    try:
        _publish(service)
        with service.client("operator") as client:
            accepted = client.post("/runs", json=_body("agent:async"), headers=PREFER_ASYNC)
        assert accepted.status_code == 202, accepted.text
        async_id = accepted.json()["run_id"]
        assert _running(store) == async_id
        async_failed = _failed_mid_run(service, async_id, judge_env, len(CASES))
        waiting = threading.Thread(target=wait_for_run, daemon=True)
        waiting.start()
        waited_id = _running(store, frozenset({async_id}))
        waited_failed = _failed_mid_run(service, waited_id, judge_env, 2 * len(CASES))
        waiting.join(60)
    finally:
        service.stop()
    for run_id, failed in ((async_id, async_failed), (waited_id, waited_failed)):
        assert failed.problem["run_status"] == "failed"
        assert "File too large" in failed.problem["detail"], failed.problem["detail"]
        assert str(service.store_dir) not in failed.problem["detail"]
        # The store could record nothing: the service knows what its aggregate does not say.
        aggregate = load_aggregate(store, run_id)
        assert aggregate.status is RunStatus.RUNNING
        assert aggregate.owner is not None and aggregate.owner.flow_run is not None
        with get_client(sync_client=True) as prefect:
            ended = prefect.read_flow_run(UUID(aggregate.owner.flow_run)).state
        assert ended is not None and ended.type.value == "FAILED" and ended.timestamp
        after_end = (failed.answered_at - ended.timestamp).total_seconds()
        print(
            f"run {run_id}: failed {failed.answered:.2f} s after the disk filled "
            f"({after_end:.2f} s after its flow run ended Failed), "
            f"streams closed {failed.closed:.2f} s after the disk filled"
        )
        assert failed.answered < TRUE_WITHIN_SECONDS and failed.closed < TRUE_WITHIN_SECONDS
    assert [response.status_code for response in waited] == [503]


def test_after_kill_9_every_accepted_run_answers_a_true_state_and_its_key_replays_it(
    tmp_path: Path, prefect_api: str, judge_env: JudgeServer
) -> None:
    judge_env.script(default=slow(300))
    service = start_service(
        tmp_path,
        "--max-concurrent-runs",
        "1",
        "--max-queued-runs",
        "4",
        prefect_api_url=prefect_api,
    )
    bad_line = [*OUTPUTS[:-1], {"case_id": "no-such-case", "output": "x"}]
    bodies = {
        "failed": _body("agent:bad-line", bad_line),
        "running": _body("agent:running"),
        "queued-1": _body("agent:queued-1"),
        "queued-2": _body("agent:queued-2"),
    }
    accepted: dict[str, str] = {}

    def submit(client: httpx.Client, name: str) -> httpx.Response:
        headers = {**PREFER_ASYNC, "Idempotency-Key": f"build-{name}"}
        return client.post("/runs", json=bodies[name], headers=headers)

    try:
        _publish(service)
        store = FileStore(service.store_dir)
        with service.client("operator") as client:
            for name in bodies:
                response = submit(client, name)
                assert response.status_code == 202, response.text
                accepted[name] = response.json()["run_id"]
                if name == "failed":  # it fails before its flow records it
                    _answer(client, accepted[name])
                elif name == "running":  # it holds the one slot: the others queue
                    assert _running(store) == accepted[name]
            before = {name: client.get(f"/runs/{run_id}") for name, run_id in accepted.items()}
        os.kill(service.process.pid, signal.SIGKILL)
        service.process.stop()
        service.process.start()
        with service.client("operator") as client:
            after = {name: client.get(f"/runs/{run_id}") for name, run_id in accepted.items()}
            replayed = {name: submit(client, name) for name in bodies}
            streams = {
                name: client.get(f"/runs/{run_id}/events") for name, run_id in accepted.items()
            }
    finally:
        service.stop()
    assert {name: response.status_code for name, response in before.items()} == {
        "failed": 409,
        "running": 202,
        "queued-1": 202,
        "queued-2": 202,
    }
    assert [before[name].json()["status"] for name in ("running", "queued-1", "queued-2")] == [
        "running",
        "queued",
        "queued",
    ]
    failed_before = _problem(before["failed"], 409)
    assert failed_before["run_status"] == "failed" and "no-such-case" in failed_before["detail"]
    for name, run_id in accepted.items():
        problem = _problem(after[name], 409)
        expected = "failed" if name == "failed" else "interrupted"
        assert problem["run_status"] == expected, (name, problem)
        if name == "failed":
            assert problem["detail"] == failed_before["detail"]
        else:
            assert "submit the run again" in problem["detail"], problem["detail"]
        replay = replayed[name]
        assert replay.status_code == 202, replay.text
        assert replay.headers["idempotent-replayed"] == "true"
        assert replay.json()["run_id"] == run_id and replay.json()["status"] == expected
        assert replay.json()["error"] in problem["detail"]
        assert _problem(streams[name], 409)["run_status"] == expected
    for name in ("queued-1", "queued-2"):  # never started: nothing but their acceptance
        assert not (service.store_dir / "runs" / accepted[name]).exists()
