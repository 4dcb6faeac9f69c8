"""The nightly fan-out as it runs in production: a real `prefect server` on PostgreSQL, the
deployments from deployments/prefect.yaml, two `prefect worker` processes on the `assay` pool,
the nightly deployment triggered through the API. Its jobs run as separate nightly-job flow runs
on both workers at once, and a re-triggered nightly starts none of them again."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from assay.runs.records import list_runs
from assay.store import FileStore
from tests.prefect_server import BIN, api_call, pool_and_deployments, prefect_server_process

pytestmark = pytest.mark.e2e

TERMINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}
WAIT_SECONDS = 420.0
JOBS = [
    {"suite": "examples/support-suite.yaml", "subject": subject, "outputs": outputs}
    for subject, outputs in [
        ("agent:support-bot@v1", "examples/outputs/support-bot-v1.jsonl"),
        ("agent:support-bot@v2", "examples/outputs/support-bot-v2.jsonl"),
        ("agent:support-bot@v1-again", "examples/outputs/support-bot-v1.jsonl"),
        ("agent:support-bot@v2-again", "examples/outputs/support-bot-v2.jsonl"),
    ]
]


@pytest.fixture
def server_on_postgres(tmp_path: Path, postgres_url: str) -> Iterator[dict[str, str]]:
    with prefect_server_process(
        tmp_path / "prefect-home", tmp_path / "server.log", database_url=postgres_url
    ) as env:
        yield env


def _deployment_id(api: str, name: str) -> str:
    body = {"deployments": {"name": {"any_": [name]}}}
    (deployment,) = api_call(api, "/deployments/filter", body)
    return str(deployment["id"])


def _trigger_and_wait(api: str, deployment_id: str, parameters: dict[str, Any]) -> dict[str, Any]:
    run = api_call(api, f"/deployments/{deployment_id}/create_flow_run", {"parameters": parameters})
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        current = api_call(api, f"/flow_runs/{run['id']}")
        if current["state_type"] in TERMINAL:
            return dict(current)
        time.sleep(1)
    raise TimeoutError(f"nightly run {run['id']} did not finish in {WAIT_SECONDS} s")


def _job_runs(api: str, deployment_id: str) -> list[dict[str, Any]]:
    body = {"flow_runs": {"deployment_id": {"any_": [deployment_id]}}}
    return list(api_call(api, "/flow_runs/filter", body))


def _span(run: dict[str, Any]) -> tuple[datetime, datetime]:
    return datetime.fromisoformat(run["start_time"]), datetime.fromisoformat(run["end_time"])


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if the worker is still there 30 s later: a worker whose API
    refuses connections as the test ends (seen under a full test run's load) backs off for
    longer than that before it exits, which says nothing about the fan-out checked here."""
    worker.terminate()
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(10)


def test_nightly_fans_out_over_two_workers_and_a_retrigger_starts_no_job_twice(
    server_on_postgres: dict[str, str], tmp_path: Path
) -> None:
    env = server_on_postgres | {"PREFECT_WORKER_QUERY_SECONDS": "1"}
    api = env["PREFECT_API_URL"]
    store = tmp_path / "evidence"
    pool_and_deployments(env, "nightly", "nightly-job")
    nightly_id = _deployment_id(api, "nightly")
    job_deployment_id = _deployment_id(api, "nightly-job")
    parameters = {
        "options": {
            "jobs": JOBS,
            "store": f"file://{store}",
            "job_deployment": "suite-run/nightly-job",
            "max_parallel": 4,
        }
    }
    logs = {name: tmp_path / f"{name}.log" for name in ("worker-a", "worker-b")}
    with ExitStack() as stack:
        for name, log in logs.items():
            handle = stack.enter_context(log.open("wb"))
            # --limit 2: the nightly itself holds a slot on one worker; the jobs need the other.
            worker = subprocess.Popen(
                [
                    *(str(BIN / "prefect"), "worker", "start", "--pool", "assay"),
                    *("--name", name, "--limit", "2"),
                ],
                cwd=tmp_path,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
            stack.callback(_stop, worker)

        first = _trigger_and_wait(api, nightly_id, parameters)
        # v2 does not pass: the nightly's verdict is `Some failed`, a Failed state.
        assert (first["state_type"], first["state_name"]) == ("FAILED", "Some failed"), logs[
            "worker-a"
        ].read_text()[-3000:]
        jobs = _job_runs(api, job_deployment_id)
        retriggered = _trigger_and_wait(api, nightly_id, parameters)

    assert len(jobs) == len(JOBS)
    assert {(run["state_type"], run["state_name"]) for run in jobs} == {
        ("COMPLETED", "Passed"),
        ("FAILED", "Not passed"),
    }
    assert all(run["parent_task_run_id"] for run in jobs)  # each is linked to the nightly
    ran_on = {  # the engine in a worker's flow-run process logs the run's UI address
        name: {run["id"] for run in jobs if f"/runs/flow-run/{run['id']}" in log.read_text()}
        for name, log in logs.items()
    }
    assert ran_on["worker-a"] and ran_on["worker-b"], ran_on
    assert not ran_on["worker-a"] & ran_on["worker-b"]
    # The nightly kept every job in flight at once (max_parallel 4): each job run was created
    # before any ended. (That two workers then ran two of them at the same moment depends on
    # when each polled: a 1-2 s job run on a loaded 2-core machine may end before the other
    # worker's next poll, so overlap in time is not asserted — it failed a clean-clone run.)
    first_end = min(_span(run)[1] for run in jobs)
    assert all(datetime.fromisoformat(run["created"]) < first_end for run in jobs)

    assert (retriggered["state_type"], retriggered["state_name"]) == ("FAILED", "Some failed")
    after = _job_runs(api, job_deployment_id)
    assert {run["id"] for run in after} == {run["id"] for run in jobs}  # no job started twice
    recorded = list_runs(FileStore(store))
    assert sorted(r.run_id for r in recorded) == sorted(run["id"] for run in jobs)
    assert {r.status for r in recorded} == {"completed"}
