"""Real S3-compatible servers for tests: moto and rclone, as subprocesses on free local ports.

Tests talk to them over HTTP with the real boto3 client, so the store's retries, conditional
writes and pagination meet real server behaviour. moto keeps objects in memory and enforces
`If-None-Match`; `rclone serve s3` keeps them as files (they survive a restart) and ignores the
header. tests/conftest.py imports the fixtures, so every test module can use them.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeVar
from uuid import uuid4

import pytest

from assay.s3 import make_client
from assay.store.s3 import S3Store

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

BIN = Path(sys.executable).parent
ACCESS_KEY_ID = "testing"
SECRET_ACCESS_KEY = "testing"
REGION = "us-east-1"
START_TIMEOUT_SECONDS = 30.0
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Readiness checks go straight to 127.0.0.1, whatever proxy the environment names."""


def stop_process(process: subprocess.Popen[bytes], grace_seconds: float) -> None:
    """SIGTERM, then SIGKILL when the process has not exited after `grace_seconds`."""
    process.terminate()
    try:
        process.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """One server subprocess with a fixed command line and port; can be stopped and restarted."""

    def __init__(
        self,
        command: list[str],
        port: int,
        log: Path,
        *,
        env: dict[str, str] | None = None,
        timeout: float = START_TIMEOUT_SECONDS,
    ) -> None:
        self.command = command
        self.port = port
        self.log = log
        self.env = env
        self.timeout = timeout
        self._process: subprocess.Popen[bytes] | None = None
        self._log_handle: IO[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        """The server's HTTP base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start the server and wait until it answers HTTP (any status counts as an answer)."""
        self._log_handle = self.log.open("ab")
        self._process = subprocess.Popen(
            self.command, stdout=self._log_handle, stderr=subprocess.STDOUT, env=self.env
        )
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.command[0]} exited at start:\n{self._log_tail()}")
            if self._answers():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.command[0]} did not answer within {self.timeout}s")

    @property
    def pid(self) -> int:
        """The server process's id (it must be running)."""
        assert self._process is not None
        return self._process.pid

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s); the port is free when this returns."""
        if self._process is not None:
            stop_process(self._process, grace_seconds=5)
            self._process = None
        if self._log_handle is not None:
            self._log_handle.close()
            self._log_handle = None

    def _answers(self) -> bool:
        try:
            with _DIRECT.open(self.endpoint_url, timeout=1):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def _log_tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


@dataclass
class S3Server:
    """A running S3-compatible server and what a client needs to reach it."""

    name: str
    process: ServerProcess

    @property
    def endpoint_url(self) -> str:
        """The server's HTTP base URL."""
        return self.process.endpoint_url

    def client(self) -> S3Client:
        """A client for this server with explicit test credentials (no environment needed)."""
        return make_client(
            endpoint_url=self.endpoint_url,
            access_key_id=ACCESS_KEY_ID,
            secret_access_key=SECRET_ACCESS_KEY,
            region=REGION,
        )

    def create_bucket(self) -> str:
        """Create a bucket with a fresh unique name and return the name."""
        bucket = f"assay-{uuid4().hex[:16]}"
        self.client().create_bucket(Bucket=bucket)
        return bucket

    def store(self, prefix: str = "assay") -> S3Store:
        """An S3Store on a fresh bucket of this server."""
        return S3Store(self.create_bucket(), prefix, client=self.client())

    def use_from_env(self, monkeypatch: pytest.MonkeyPatch, prefix: str = "assay") -> str:
        """Point boto3's environment at this server with a fresh bucket; return its store URI.

        This is how a user configures an S3-compatible server (`AWS_ENDPOINT_URL` and the
        standard credential variables), so code under test opens the store with `open_store`.
        """
        monkeypatch.setenv("AWS_ENDPOINT_URL", self.endpoint_url)
        monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
        monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
        for shadowing in ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(shadowing, raising=False)
        return f"s3://{self.create_bucket()}/{prefix}"


class RestartableS3Server(S3Server):
    """An S3 server a test owns, so it may stop and restart it (same port) to inject faults."""

    def stop(self) -> None:
        """Stop the server: clients get connection errors until `start`."""
        self.process.stop()

    def start(self) -> None:
        """Start the server again on the same port and wait until it answers."""
        self.process.start()


def _moto(log_dir: Path) -> ServerProcess:
    port = free_port()
    command = [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)]
    return ServerProcess(command, port, log_dir / f"moto-{port}.log")


def _rclone(root: Path, log_dir: Path) -> ServerProcess:
    port = free_port()
    root.mkdir(parents=True, exist_ok=True)
    command = [
        str(BIN / "rclone"),
        "serve",
        "s3",
        "--addr",
        f"127.0.0.1:{port}",
        "--auth-key",
        f"{ACCESS_KEY_ID},{SECRET_ACCESS_KEY}",
        "--config",
        str(log_dir / "rclone.conf"),  # absent file: defaults, never the developer's remotes
        str(root),
    ]
    return ServerProcess(command, port, log_dir / f"rclone-{port}.log")


ServerT = TypeVar("ServerT", bound=S3Server)


def _serve(kind: type[ServerT], name: str, process: ServerProcess) -> Iterator[ServerT]:
    process.start()
    try:
        yield kind(name, process)
    finally:
        process.stop()


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A moto S3 server for the whole session (in memory; enforces `If-None-Match`)."""
    yield from _serve(S3Server, "moto", _moto(tmp_path_factory.mktemp("moto")))


@pytest.fixture(scope="session")
def rclone_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """An `rclone serve s3` server for the session (files on disk; ignores `If-None-Match`)."""
    base = tmp_path_factory.mktemp("rclone")
    yield from _serve(S3Server, "rclone", _rclone(base / "root", base))


@pytest.fixture
def restartable_moto(tmp_path: Path) -> Iterator[RestartableS3Server]:
    """A moto server this test owns and may stop and start. A restart loses every object."""
    yield from _serve(RestartableS3Server, "moto", _moto(tmp_path))


@pytest.fixture
def restartable_rclone(tmp_path: Path) -> Iterator[RestartableS3Server]:
    """An rclone S3 server this test owns; objects are files, so they survive a restart."""
    yield from _serve(RestartableS3Server, "rclone", _rclone(tmp_path / "rclone-root", tmp_path))


@pytest.fixture
def s3_env(moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """`AWS_ENDPOINT_URL` and test credentials pointing at the session's moto server, and a
    fresh bucket; returns the store URI `s3://BUCKET/assay` (also usable as `ASSAY_STORE`)."""
    return moto_s3.use_from_env(monkeypatch)
