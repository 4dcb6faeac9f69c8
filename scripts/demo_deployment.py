"""`make demo`'s last step: the nightly deployment on the lasting server, paused.

So that the Prefect UI's Deployments page shows what runs every night (its schedule, its jobs as
parameters) without it running: deployments/prefect.yaml's `nightly`, with `paused: true`, is
deployed to the server `assay server start` recorded, from this clone (its `pull` step), on the
`assay` process pool (created when missing). Switch it on from the UI once the jobs point at
your outputs; run it now with `prefect deployment run nightly/nightly` and a worker
(docs/prefect.md). Prints one line; exits 1 when there is no lasting server or the deploy fails.

Usage: .venv/bin/python scripts/demo_deployment.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from assay.cli import orchestration

ROOT = Path(__file__).resolve().parent.parent
DEPLOYMENTS = ROOT / "deployments" / "prefect.yaml"
PREFECT = Path(sys.executable).parent / "prefect"
NAME = "nightly"


def _prefect(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(PREFECT), *args], env=env, cwd=ROOT, capture_output=True, text=True, check=False
    )


def main() -> int:
    server = orchestration.running_server()
    if server is None:
        print("demo deployment: no lasting server (`assay server start`); nothing deployed")
        return 1
    env = {**os.environ, "PREFECT_API_URL": server.api_url}
    spec = yaml.safe_load(DEPLOYMENTS.read_text(encoding="utf-8"))
    for deployment in spec["deployments"]:
        if deployment["name"] == NAME:
            deployment["paused"] = True
    if _prefect(env, "work-pool", "inspect", "assay").returncode != 0:
        _prefect(env, "work-pool", "create", "assay", "--type", "process")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=ROOT / "deployments") as paused:
        yaml.safe_dump(spec, paused, sort_keys=False)
        paused.flush()
        done = _prefect(env, "--no-prompt", "deploy", "--prefect-file", paused.name, "--name", NAME)
    if done.returncode != 0:
        last = (done.stdout + done.stderr).strip().splitlines()[-1:]
        print(f"demo deployment: prefect deploy failed: {' '.join(last)}")
        return 1
    print(f"Deployment {NAME}/{NAME} (paused) on {server.ui_url}/deployments")
    return 0


if __name__ == "__main__":
    sys.exit(main())
