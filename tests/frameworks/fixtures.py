"""Record every framework setup once per test session.

`record_all(out)` starts the scripted model server in this process and runs
`python -m tests.frameworks.record SETUP OUT/SETUP --model-url URL` for each setup, a few at a
time, each in its own process (instrumentors are global); it returns setup -> its folder. The
`framework_recordings` fixture (session scope) calls it once into a temporary folder, and skips
when the `frameworks` extra is not installed (`pip install -e '.[frameworks]'`).

    from tests.frameworks.fixtures import framework_recordings  # in tests/conftest.py

    def test_x(framework_recordings: dict[str, Path]) -> None:
        traces = framework_recordings["agents-genai"] / "traces.pb"

`conversation_recordings` is the same for the multi-turn conversations (`converse.py`), and
`session_recordings` for those conversations recorded one trace per user turn (`sessions.py`).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.frameworks.converse import CONVERSATION_SETUPS
from tests.frameworks.model_server import running_model_server
from tests.frameworks.record import ALL_SETUPS, CLEARED_ENV_PREFIXES
from tests.frameworks.sessions import SESSION_SETUPS

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_SECONDS = 120.0
PARALLEL = 4
FRAMEWORK_MODULES = (
    "agents",
    "langgraph.prebuilt",
    "langchain_openai",
    "anthropic",
    "openinference.instrumentation.openai_agents",
    "openinference.instrumentation.langchain",
    "opentelemetry.instrumentation.openai_v2",
    "opentelemetry.instrumentation.openai_agents",
    "opentelemetry.exporter.otlp.proto.http",
)


def missing_frameworks() -> list[str]:
    """The modules of the `frameworks` extra that are not installed."""
    missing = []
    for module in FRAMEWORK_MODULES:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:
            found = False
        if not found:
            missing.append(module)
    return missing


def _record(setup: str, out: Path, model_url: str, env: dict[str, str], recording: str) -> None:
    folder = out / setup
    command = [sys.executable, "-m", "tests.frameworks.record", setup, str(folder)]
    if recording != "scenarios":
        command.append(f"--{recording}")
    done = subprocess.run(
        [*command, "--model-url", model_url],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        check=False,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"recording {setup} failed (exit {done.returncode}):\n{tail}")


RECORDINGS = {
    "scenarios": ALL_SETUPS,
    "conversations": CONVERSATION_SETUPS,
    "sessions": SESSION_SETUPS,
}
"""What can be recorded, and the setups that record it."""


def record_all(
    out: Path, setups: Iterable[str] = ALL_SETUPS, *, recording: str = "scenarios"
) -> dict[str, Path]:
    """Record each setup into `out / SETUP` (`recording`: one of `RECORDINGS`); returns setup ->
    that folder."""
    chosen = list(setups)
    known = RECORDINGS[recording]
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise ValueError(f"unknown setups {unknown}; known: {list(known)}")
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEARED_ENV_PREFIXES)}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
    out.mkdir(parents=True, exist_ok=True)
    with (
        running_model_server() as server,
        ThreadPoolExecutor(max_workers=PARALLEL) as pool,
    ):
        jobs = [pool.submit(_record, setup, out, server.url, env, recording) for setup in chosen]
        for job in jobs:
            job.result()
    return {setup: out / setup for setup in chosen}


@pytest.fixture(scope="session")
def framework_recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every setup's recordings (recorded once per session): setup -> its folder."""
    missing = missing_frameworks()
    if missing:
        pytest.skip(f"the frameworks extra is not installed (no {', '.join(missing)})")
    return record_all(tmp_path_factory.mktemp("framework-recordings"))


@pytest.fixture(scope="session")
def conversation_recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The conversations recorded by each setup of `converse.py` (once per session)."""
    missing = missing_frameworks()
    if missing:
        pytest.skip(f"the frameworks extra is not installed (no {', '.join(missing)})")
    out = tmp_path_factory.mktemp("conversation-recordings")
    return record_all(out, CONVERSATION_SETUPS, recording="conversations")


@pytest.fixture(scope="session")
def session_recordings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The conversations recorded one trace per user turn by each setup of `sessions.py`."""
    missing = missing_frameworks()
    if missing:
        pytest.skip(f"the frameworks extra is not installed (no {', '.join(missing)})")
    out = tmp_path_factory.mktemp("session-recordings")
    return record_all(out, SESSION_SETUPS, recording="sessions")
