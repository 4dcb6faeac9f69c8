"""A followed run's event stream is never silent for long: while a run waits for its judge, the
service sends SSE comment lines (`: keep-alive`) every `--keepalive-seconds`, so that a proxy
that closes idle connections (nginx: 60 s) does not cut a follower off mid-run. Clients ignore
comments: the frames they read are unchanged.

`assay serve` runs as a real process on the session's Prefect API; the judge is the scripted
test server, slow enough that the run is silent between its chunks."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from tests.api_service import start_service
from tests.judge_server import JudgeServer, slow

SUITE = "kept-alive"
CASES = [{"id": "c0", "input": "q", "scorers": [{"llm_judge": {"rubric": "Polite?"}}]}]
KEEPALIVE_SECONDS = 0.25
JUDGE_SECONDS = 2.0


def test_a_silent_run_s_stream_carries_keep_alive_comments_then_its_summary(
    tmp_path: Path, prefect_api: str, judge_env: JudgeServer
) -> None:
    judge_env.script(default=slow(JUDGE_SECONDS))
    service = start_service(
        tmp_path, "--keepalive-seconds", str(KEEPALIVE_SECONDS), prefect_api_url=prefect_api
    )
    try:
        with service.client("operator") as client:
            assert client.post("/suites", json={"suite": SUITE, "cases": CASES}).status_code == 201
            accepted = client.post(
                "/runs",
                json={
                    "suite": SUITE,
                    "subject": "agent:kept@v1",
                    "outputs": [{"case_id": "c0", "output": "yes"}],
                },
                headers={"Prefer": "respond-async"},
            )
            assert accepted.status_code == 202, accepted.text
            run_id = accepted.json()["run_id"]
        arrivals: list[tuple[float, str]] = []
        with (
            service.client("viewer") as client,
            client.stream("GET", f"/runs/{run_id}/events", timeout=60) as stream,
        ):
            assert stream.status_code == 200
            for line in stream.iter_lines():
                arrivals.append((time.monotonic(), line))
    finally:
        service.stop()
    lines = [line for _, line in arrivals]
    comments = [at for at, line in arrivals if line == ": keep-alive"]
    assert lines.count("event: summary") == 1 and "event: case" in lines
    assert len(comments) >= 3, lines
    # No gap between two lines of the stream is much longer than the keep-alive interval.
    times = [at for at, _ in arrivals]
    assert max(b - a for a, b in itertools.pairwise(times)) < JUDGE_SECONDS
