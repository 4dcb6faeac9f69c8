"""End to end as users run it: a real `prefect server`, blocks, `prefect deploy`, a process worker,
the on-demand deployment run with parameters, evidence in an S3-compatible bucket — and no output
text anywhere in the server's database or the bucket."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import EXAMPLES
from tests.prefect_server import api_call, pool_and_deployments, run_cli
from tests.servers import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, S3Server, stop_process

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
CANARY = "CANARY-e2e-4b1d-never-stored"


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
    from assay.outputs.index import index_outputs
    from assay.outputs.slices import read_slice
    from assay.runs.metrics import tally
    from assay.runs.scoring import CompiledSuite, score_outputs
    from assay.suites.suite import load_suite

    compiled = CompiledSuite.compile(load_suite(EXAMPLES / "support-suite.yaml"))
    ids = set(compiled.cases)
    (piece,) = index_outputs(str(outputs), ids, ids, chunk_size=1000).slices
    cases = score_outputs(compiled, read_slice(piece, ids), OutputHasher(b"any"))
    return tally(cases).model_dump()


SHUTDOWN_GRACE_SECONDS = 30
"""On a loaded machine a Prefect server or worker can take longer than this to stop on SIGTERM,
which is no failure of what the test checks: it is then killed."""


def test_on_demand_deployment_runs_on_a_worker_and_stores_evidence_in_s3(
    prefect_server: dict[str, str], moto_s3: S3Server, tmp_path: Path
) -> None:
    env = prefect_server
    api = env["PREFECT_API_URL"]
    bucket = moto_s3.create_bucket()
    outputs = _canary_outputs(tmp_path)

    run_cli(env, "prefect", "block", "register", "-m", "blocks")
    run_cli(
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
    pool_and_deployments(env)
    deployments = api_call(api, "/deployments/filter", {})
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
        params = {  # the run's options as a whole (they replace the deployment's)
            "options": {
                "suite": "examples/support-suite.yaml",
                "outputs": str(outputs),
                "subject": "agent:support-bot@e2e",
                "storage_block": "e2e-evidence",
            }
        }
        # `--watch` exits 1 when the run ends Failed, as a `Not passed` verdict does.
        subprocess.run(
            [
                *(str(BIN / "prefect"), "deployment", "run", "suite-run/on-demand"),
                *("--params", json.dumps(params), "--watch", "--watch-timeout", "240"),
            ],
            cwd=REPO,
            env=env,
            capture_output=True,
            timeout=300,
        )
    finally:
        stop_process(worker, SHUTDOWN_GRACE_SECONDS)
        worker_log.close()

    runs = api_call(api, "/flow_runs/filter", {"flow_runs": {"tags": {"all_": ["on-demand"]}}})
    assert len(runs) == 1
    run = runs[0]
    assert run["state_type"] in {"COMPLETED", "FAILED"}, (tmp_path / "worker.log").read_text()[
        -3000:
    ]
    # A deployment run is renamed SUITE@VERSION · SUBJECT and tagged once its suite resolves.
    assert run["name"] == "support-bot@1 · agent:support-bot@e2e"
    assert {"assay", "suite:support-bot", "subject:agent:support-bot@e2e"} <= set(run["tags"])
    scored = _scored_in_process(outputs)
    passed = scored["passed"] / scored["scored"] >= 0.8  # the example suite's pass threshold
    assert (run["state_type"], run["state_name"]) == (  # named for the verdict
        ("COMPLETED", "Passed") if passed else ("FAILED", "Not passed")
    )
    artifacts = api_call(
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
