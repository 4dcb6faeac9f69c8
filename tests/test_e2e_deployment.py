"""End to end as users run it: a real `prefect server`, blocks, `prefect deploy`, a process worker,
the on-demand deployment run with parameters, evidence in an S3-compatible bucket — and no output
text anywhere in the server's database or the bucket."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES
from tests.servers import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, S3Server, free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CANARY = "CANARY-e2e-4b1d-never-stored"


def _wait_healthy(api: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{api}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"Prefect server at {api} did not become healthy in {timeout} s")


def _api(api: str, path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        f"{api}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """`prefect server start` on a free port with its own home; yields the env to reach it."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PREFECT_", "ASSAY_", "AWS_"))
    }
    env |= {
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_API_URL": api,
        "PREFECT_UI_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    }
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_healthy(api)
        yield env
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _run(env: dict[str, str], *command: str) -> str:
    done = subprocess.run(
        [str(BIN / command[0]), *command[1:]],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _canary_outputs(tmp_path: Path) -> Path:
    source = EXAMPLES / "outputs" / "support-bot-v1.jsonl"
    rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    path = tmp_path / "canary-outputs.jsonl"
    path.write_text(
        "".join(json.dumps({**row, "output": f"{row['output']} {CANARY}"}) + "\n" for row in rows)
    )
    return path


def _scored_in_process(outputs: Path) -> dict[str, Any]:
    """The same suite and outputs scored by the library directly, for comparison."""
    from assay.hashing import OutputHasher
    from assay.outputs import index_outputs, read_slice
    from assay.scoring import CompiledSuite, score_outputs, tally
    from assay.suites import load_suite

    compiled = CompiledSuite.compile(load_suite(EXAMPLES / "support-suite.yaml"))
    ids = set(compiled.cases)
    (piece,) = index_outputs(str(outputs), ids, ids, chunk_size=1000).slices
    cases = score_outputs(compiled, read_slice(piece, ids), OutputHasher(b"any"))
    return tally(cases).model_dump()


def test_on_demand_deployment_runs_on_a_worker_and_stores_evidence_in_s3(
    prefect_server: dict[str, str], moto_s3: S3Server, tmp_path: Path
) -> None:
    env = prefect_server
    api = env["PREFECT_API_URL"]
    bucket = moto_s3.create_bucket()
    outputs = _canary_outputs(tmp_path)

    _run(env, "prefect", "block", "register", "-m", "blocks")
    _run(
        env,
        "assay",
        "store",
        "save",
        "e2e-evidence",
        "--url",
        f"s3://{bucket}/assay",
        "--endpoint-url",
        moto_s3.endpoint_url,
        "--region",
        REGION,
        "--access-key-id",
        ACCESS_KEY_ID,
        "--secret-access-key",
        SECRET_ACCESS_KEY,
    )
    _run(env, "prefect", "work-pool", "create", "assay", "--type", "process")
    _run(
        env,
        "prefect",
        "--no-prompt",
        "deploy",
        "--prefect-file",
        "deployments/prefect.yaml",
        "--all",
    )
    deployments = _api(api, "/deployments/filter", {})
    assert {d["name"] for d in deployments} == {
        "nightly",
        "nightly-job",
        "on-demand",
        "monitor-hourly",
        "gate",
        "calibration",
        "release",
        "outcome",
    }
    nightly = next(d for d in deployments if d["name"] == "nightly")
    assert nightly["schedules"][0]["schedule"]["cron"] == "0 2 * * *"

    worker_log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [str(BIN / "prefect"), "worker", "start", "--pool", "assay"],
        cwd=tmp_path,  # the deployment's pull step, not the worker's cwd, must find the repo
        env=env,
        stdout=worker_log,
        stderr=subprocess.STDOUT,
    )
    try:
        params = {
            "outputs": str(outputs),
            "subject": "agent:support-bot@e2e",
            "storage_block": "e2e-evidence",
        }
        _run(
            env,
            "prefect",
            "deployment",
            "run",
            "suite-run/on-demand",
            "--params",
            json.dumps(params),
            "--watch",
            "--watch-timeout",
            "240",
        )
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        worker_log.close()

    runs = _api(api, "/flow_runs/filter", {"flow_runs": {"tags": {"all_": ["on-demand"]}}})
    assert len(runs) == 1
    run = runs[0]
    assert run["state_type"] == "COMPLETED", (tmp_path / "worker.log").read_text()[-3000:]
    assert run["name"] == "support-suite.yaml · agent:support-bot@e2e"
    artifacts = _api(
        api, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run["id"]]}}}
    )
    assert {a["type"] for a in artifacts} >= {"markdown", "table"}

    client = moto_s3.client()
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    ]
    result_key = f"assay/runs/{run['id']}/result.json"
    assert result_key in keys
    result = json.loads(client.get_object(Bucket=bucket, Key=result_key)["Body"].read())
    assert result["metrics"] == {**_scored_in_process(outputs), "write_guard": "if-none-match"}

    needle = CANARY.encode()
    for key in keys:
        assert needle not in client.get_object(Bucket=bucket, Key=key)["Body"].read(), key
    home = Path(env["PREFECT_HOME"])
    database_files = [p for p in home.rglob("*") if p.is_file()]
    assert any(p.name.startswith("prefect.db") for p in database_files)
    assert [p for p in database_files if needle in p.read_bytes()] == []
    assert needle not in (tmp_path / "worker.log").read_bytes()
