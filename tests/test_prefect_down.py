"""With the Prefect API down, `assay run` and `assay gate` say so in one line and exit 2.

Each command runs as a real `assay` process. At start: `PREFECT_API_URL` names a closed local
port, and the answer comes at once, before any run is recorded. Mid-run: a real `prefect server
start` is stopped while a judged run is scoring (the scripted judge server answers slowly); the
command ends with one line naming the `assay run … --resume RUN_ID` that continues the run, and
that very command, once the server is back, completes it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.runs.records import RunStatus, load_aggregate
from assay.store import FileStore
from tests.conftest import EXAMPLES
from tests.judge_server import JudgeServer, slow, verdict
from tests.prefect_server import BIN, wait_healthy
from tests.servers import ServerProcess, free_port

SUITE = str(EXAMPLES / "support-suite.yaml")
OUTPUTS = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
AT_START_SECONDS = 10.0
"""The issue's bound for the answer when the API is down at start (a 138-line traceback before)."""


def _assay(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _one_line_exit_2(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-3000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-3000:]
    assert done.stdout == "", done.stdout[-3000:]
    return lines[0]


@pytest.mark.parametrize("command", ["run", "gate"])
def test_a_run_or_gate_with_the_prefect_api_down_is_one_line_at_once(
    store_dir: Path, command: str
) -> None:
    api = f"http://127.0.0.1:{free_port()}/api"  # nothing listens there
    env = {**os.environ, "PREFECT_API_URL": api}

    started = time.monotonic()
    done = _assay(command, SUITE, "--outputs", OUTPUTS, env=env)
    elapsed = time.monotonic() - started

    line = _one_line_exit_2(done)
    assert line.startswith(f"error: cannot reach the Prefect API at {api}: ")
    assert "start it with assay server start" in line
    assert elapsed < AT_START_SECONDS, elapsed
    assert not (store_dir / "runs").exists()  # no run was started


def _prefect_server(tmp_path: Path) -> tuple[ServerProcess, dict[str, str]]:
    """A `prefect server start` this test stops and starts again; the environment of the
    commands that use it (the test's own, so they find the judge server and the store)."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    home = tmp_path / "prefect-home"
    server_env = {
        key: value for key, value in os.environ.items() if not key.startswith("PREFECT_")
    } | {
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_UI_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    command = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    server = ServerProcess(command, port, tmp_path / "prefect.log", env=server_env, timeout=120)
    # Prefect's client retries a refused connection five times, about a minute a request,
    # before a run fails; once is enough to show what the command then says.
    run_env = os.environ | {"PREFECT_API_URL": api, "PREFECT_CLIENT_MAX_RETRIES": "1"}
    return server, run_env


def _judged_suite(tmp_path: Path) -> tuple[str, str]:
    suite = tmp_path / "slow-judge.yaml"
    cases = "".join(
        f"  - id: c{i:02d}\n    input: q\n    scorers: [{{llm_judge: {{rubric: Is polite.}}}}]\n"
        for i in range(40)
    )
    suite.write_text(f"suite: slow-judge\ncases:\n{cases}")
    outputs = tmp_path / "out.jsonl"
    outputs.write_text("".join(f'{{"case_id": "c{i:02d}", "output": "yes"}}\n' for i in range(40)))
    return str(suite), str(outputs)


def _running_run(store: FileStore, process: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        for key in store.list("index/runs/"):
            run_id = key.removeprefix("index/runs/").removesuffix(".json")
            if load_aggregate(store, run_id).status is RunStatus.RUNNING:
                return run_id
        time.sleep(0.2)
    raise AssertionError("the run never started")


def test_a_run_whose_prefect_server_stops_mid_run_names_the_command_that_resumes_it(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=slow(3))  # each chunk of 10 judges for about 9 s
    suite, outputs = _judged_suite(tmp_path)
    server, env = _prefect_server(tmp_path)
    server.start()
    try:
        wait_healthy(env["PREFECT_API_URL"])
        arguments = ["run", suite, "--outputs", outputs, "--chunk-size", "10"]
        process = subprocess.Popen(
            [sys.executable, "-m", "assay.cli", *arguments],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        store = FileStore(store_dir)
        run_id = _running_run(store, process)
        # Once every chunk is being judged: its budgets are read at its first judge call
        # (before it, a chunk whose budgets cannot be read is refused — fail closed).
        deadline = time.monotonic() + 60
        while len(judge_env.requests) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        server.stop()  # while the chunks are being judged
        stdout, stderr = process.communicate(timeout=300)

        line = _one_line_exit_2(
            subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        )
        api = env["PREFECT_API_URL"]
        assert line.startswith(
            f"error: the Prefect API at {api} stopped answering during run {run_id}; "
            "its evidence so far is kept"
        )
        resume = line.partition("resume it with ")[2]
        assert resume.startswith("assay run slow-judge@1 --outputs ")
        assert resume.endswith(f"--resume {run_id}")
        assert load_aggregate(store, run_id).status is RunStatus.FAILED

        judge_env.script(default=verdict("pass", 0.9))
        server.start()  # the same database: the run's first flow run is still there
        wait_healthy(api)
        resumed = _assay(*shlex.split(resume)[1:], env=env)
    finally:
        server.stop()

    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "slow-judge@1 · agent:out  PASSED" in resumed.stdout
    assert f"run {run_id}" in resumed.stdout
    assert load_aggregate(store, run_id).status is RunStatus.COMPLETED
