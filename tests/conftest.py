"""Shared fixtures: one real Prefect API for the session, a fresh evidence store per test.

PREFECT_HOME is pointed at a temporary folder before Prefect is imported, so the minimal-data
tests can search everything Prefect wrote; a PREFECT_API_URL from the developer's shell would
silently send test runs to their server, so it is removed.
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

PREFECT_HOME = Path(tempfile.mkdtemp(prefix="assay-test-prefect-home-"))
os.environ["PREFECT_HOME"] = str(PREFECT_HOME)
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="assay-test-cache-")  # suites' copies
os.environ.pop("PREFECT_API_URL", None)
os.environ.pop("ASSAY_STORE", None)
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"

from assay.process_state import reset_process_state  # noqa: E402
from tests.dask_cluster import dask_cluster  # noqa: E402
from tests.frameworks.fixtures import (  # noqa: E402
    conversation_recordings,
    framework_recordings,
    session_recordings,
)
from tests.judge_server import judge_env, judge_server, judge_server_session  # noqa: E402
from tests.prefect_server import postgres_url, prefect_server  # noqa: E402
from tests.servers import (  # noqa: E402 - fixtures for every test module; env is set first
    moto_s3,
    rclone_s3,
    restartable_moto,
    restartable_rclone,
    s3_env,
)

__all__ = [
    "conversation_recordings",
    "dask_cluster",
    "framework_recordings",
    "judge_env",
    "judge_server",
    "judge_server_session",
    "moto_s3",
    "postgres_url",
    "prefect_server",
    "rclone_s3",
    "restartable_moto",
    "restartable_rclone",
    "s3_env",
    "session_recordings",
]

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="session")
def prefect_api() -> Iterator[str]:
    """A real Prefect API server (subprocess, SQLite) for the whole session; yields its URL."""
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=60):
        yield str(PREFECT_API_URL.value())
        # The harness logs its shutdown through Prefect's console handler, whose stream belongs
        # to a test's capture that pytest has closed by now: skip that one line.
        logging.getLogger("prefect").disabled = True


@pytest.fixture(autouse=True)
def forget_process_state() -> None:
    """Each test starts from nothing an earlier one left in this process (docs/architecture.md,
    "What a process remembers")."""
    reset_process_state()


@pytest.fixture
def store_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh local evidence store, also set as ASSAY_STORE for code that reads the default."""
    root = tmp_path / "evidence"
    monkeypatch.setenv("ASSAY_STORE", f"file://{root}")
    return root


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the test process with pytest's own exit status once every plugin has finished,
    without the interpreter's teardown: one clean-clone `make test` of session 10 passed every
    test, then died with a segmentation fault while daemon threads (uvicorn servers of the
    session's fixtures, Prefect's background workers) were torn down with the interpreter —
    a crash after the results, which would fail CI on a green run. Nothing is left to write by
    then: the results are reported, the fixtures' processes stopped."""
    if _EXIT_STATUS and os.environ.get("ASSAY_TEST_TEARDOWN") != "interpreter":
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(_EXIT_STATUS[-1])
