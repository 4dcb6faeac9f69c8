"""A real `prefect server start` for end-to-end tests, on SQLite or on a throwaway PostgreSQL.

The server runs as a subprocess on a free port with its own PREFECT_HOME; tests reach it over
HTTP and run the `prefect` and `assay` CLIs against it with the environment the fixture yields.
PostgreSQL is Debian's `postgresql` package: `initdb` and `pg_ctl` start a cluster in a temporary
folder on a free port (as the `postgres` user when the tests run as root, which initdb refuses).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.servers import free_port, stop_process

SHUTDOWN_GRACE_SECONDS = 30
"""A Prefect server that has not stopped this long after SIGTERM is killed."""

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
DEPLOYMENTS = "deployments/prefect.yaml"
HEALTHY_SECONDS = 120.0
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def wait_healthy(api: str, timeout: float = HEALTHY_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with _DIRECT.open(f"{api}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise TimeoutError(f"Prefect server at {api} did not become healthy in {timeout} s")


def api_call(api: str, path: str, body: dict[str, Any] | None = None) -> Any:
    """POST `body` (or GET when None) to the API; the decoded JSON answer."""
    request = urllib.request.Request(
        f"{api}{path}",
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="GET" if body is None else "POST",
    )
    with _DIRECT.open(request, timeout=30) as response:
        return json.loads(response.read())


def run_cli(env: dict[str, str], *command: str) -> str:
    """Run a console script of this venv from the repo root; assert success, return stdout."""
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


def pool_and_deployments(env: dict[str, str], *names: str) -> None:
    """Create the `assay` process pool and deploy `names` from deployments/prefect.yaml (all
    of them when none are named)."""
    run_cli(env, "prefect", "work-pool", "create", "assay", "--type", "process")
    chosen = [arg for name in names for arg in ("--name", name)] or ["--all"]
    run_cli(env, "prefect", "--no-prompt", "deploy", "--prefect-file", DEPLOYMENTS, *chosen)


@contextmanager
def prefect_server_process(
    home: Path, log: Path, database_url: str | None = None
) -> Iterator[dict[str, str]]:
    """`prefect server start` on a free port; yields the environment that reaches it."""
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PREFECT_", "ASSAY_", "AWS_"))
    }
    env |= {
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": api,
        "PREFECT_UI_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PATH": f"{BIN}{os.pathsep}{env.get('PATH', '')}",
    }
    server_env = env | (
        {"PREFECT_API_DATABASE_CONNECTION_URL": database_url} if database_url else {}
    )
    handle = log.open("wb")
    server = subprocess.Popen(
        [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=server_env,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_healthy(api)
        yield env
    finally:
        stop_process(server, SHUTDOWN_GRACE_SECONDS)
        handle.close()


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A Prefect server on SQLite in this test's temporary folder."""
    with prefect_server_process(tmp_path / "prefect-home", tmp_path / "server.log") as env:
        yield env


def postgres_bin() -> Path | None:
    """Where initdb and pg_ctl are: on PATH, else Debian's versioned folder."""
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(versions[-1]).parent if versions else None


@contextmanager
def throwaway_postgres(binaries: Path) -> Iterator[str]:
    """A PostgreSQL cluster in a temporary folder on a free loopback port; yields an asyncpg
    URL to its `postgres` database (user `prefect`, trust auth); removed afterwards."""
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    root = Path(tempfile.mkdtemp(prefix="assay-test-pg-"))
    if as_postgres:
        shutil.chown(root, "postgres", "postgres")
    data, port = root / "data", free_port()

    def pg(*command: str) -> None:
        subprocess.run(
            [*as_postgres, str(binaries / command[0]), *command[1:]],
            check=True,
            capture_output=True,
            timeout=120,
        )

    pg("initdb", "-D", str(data), "-U", "prefect", "--auth=trust", "--encoding=UTF8")
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=200"
    pg("pg_ctl", "-D", str(data), "-o", options, "-l", str(root / "postgres.log"), "-w", "start")
    try:
        yield f"postgresql+asyncpg://prefect@127.0.0.1:{port}/postgres"
    finally:
        pg("pg_ctl", "-D", str(data), "-m", "fast", "-w", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL cluster for this test; skipped when PostgreSQL is not installed."""
    binaries = postgres_bin()
    if binaries is None:
        pytest.skip("PostgreSQL is not installed (no initdb/pg_ctl): apt-get install postgresql")
    with throwaway_postgres(binaries) as url:
        yield url
