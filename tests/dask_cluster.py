"""A real Dask cluster for tests: `dask scheduler` and `dask worker` processes on loopback.

Workers run without a nanny, so killing a worker's process loses it for good (a nanny would
restart it) and the scheduler must reschedule its tasks elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest

from tests.servers import free_port

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
START_SECONDS = 60


@dataclass
class DaskCluster:
    """A scheduler and named workers, each a subprocess logging to its own file."""

    address: str
    logs: Path
    workers: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    handles: list[IO[bytes]] = field(default_factory=list)

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        self.handles.append(log)
        process = subprocess.Popen(
            command, cwd=REPO, env=dict(os.environ), stdout=log, stderr=subprocess.STDOUT
        )
        self.processes.append(process)
        return process

    def add_worker(self, name: str) -> None:
        """Start one single-threaded worker called `name` and wait until it has joined."""
        self.workers[name] = self._spawn(
            name,
            [
                str(BIN / "dask"),
                "worker",
                self.address,
                "--name",
                name,
                "--nthreads",
                "1",
                "--no-nanny",
                "--no-dashboard",
                "--host",
                "127.0.0.1",
            ],
        )
        with self.client() as client:
            client.wait_for_workers(len(self.workers), timeout=START_SECONDS)

    def kill(self, name: str) -> None:
        """SIGKILL one worker: no goodbye to the scheduler, its running task is lost."""
        process = self.workers.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def client(self) -> Any:
        """A plain `distributed.Client` on this cluster (use as a context manager)."""
        from distributed import Client

        return Client(self.address, timeout=START_SECONDS, set_as_default=False)

    def log_bytes(self) -> bytes:
        """Everything the scheduler and workers logged."""
        return b"".join(path.read_bytes() for path in sorted(self.logs.glob("*.log")))

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for handle in self.handles:
            handle.close()


@pytest.fixture
def dask_cluster(tmp_path: Path) -> Iterator[DaskCluster]:
    """A scheduler on a free loopback port with two workers, `worker-a` and `worker-b`."""
    logs = tmp_path / "dask-logs"
    logs.mkdir()
    port = free_port()
    cluster = DaskCluster(address=f"tcp://127.0.0.1:{port}", logs=logs)
    cluster._spawn(
        "scheduler",
        [
            str(BIN / "dask"),
            "scheduler",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-dashboard",
        ],
    )
    try:
        cluster.add_worker("worker-a")
        cluster.add_worker("worker-b")
        yield cluster
    finally:
        cluster.stop()
