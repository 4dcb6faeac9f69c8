"""The lasting local Assay service (`assay server start`, `assay.cli.local_service`): a real
`assay serve` process on loopback, on the session's Prefect API; `assay run` and `assay gate`
go through it when it is up — the outputs named by path, the command itself handed to the warm
command process beside it (`assay.cli.handoff`: the `assay` process imports neither Prefect nor
Typer) — and print the same JSON as `--local`, which runs in the process. Where a run ran is read
from the service's log (a `POST /runs` line per run it was sent)."""

from __future__ import annotations

import json
import os
import pty
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from assay.cli import local_service
from tests.conftest import EXAMPLES
from tests.servers import free_port

SUITE = str(EXAMPLES / "support-suite.yaml")
V1 = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
MODULES = "modules at exit:"
RUN = (
    "import atexit, runpy, sys\n"
    f"atexit.register(lambda: print({MODULES!r}, *sys.modules, file=sys.stderr))\n"
    "sys.argv[0] = 'assay'\n"
    "runpy.run_module('assay.cli', run_name='__main__')\n"
)


@pytest.fixture
def local(
    tmp_path: Path, prefect_api: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[local_service.LocalService, dict[str, str]]]:
    """A local service on its own PREFECT_HOME (so no other test goes through it), and the
    environment a command needs to find it."""
    home = tmp_path / "prefect-home"
    store = f"file://{tmp_path / 'store'}"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    service = local_service.start(store, prefect_api, free_port(), timeout=240)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))},
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": prefect_api,
        "ASSAY_STORE": store,
        "COLUMNS": "200",
    }
    try:
        yield service, env
    finally:
        assert local_service.stop() is not None
        assert not local_service.answers(service.url)


def _assay(*args: str, env: dict[str, str]) -> tuple[dict[str, Any], set[str]]:
    ran = subprocess.run(
        [sys.executable, "-c", RUN, *args], capture_output=True, text=True, env=env, timeout=300
    )
    others, _, modules = ran.stderr.rpartition(MODULES)
    assert ran.returncode in (0, 1), others
    return json.loads(ran.stdout), set(modules.split())


def _posted_runs() -> int:
    return local_service.log_path().read_text(encoding="utf-8").count("POST /runs")


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """A run's JSON but for its identity, time and comparison (the later run compares itself
    with the earlier one)."""
    return {k: v for k, v in result.items() if k not in ("run_id", "occurred_at", "regression")}


def test_run_and_gate_go_through_the_local_service_and_say_the_same_as_local(
    local: tuple[local_service.LocalService, dict[str, str]],
) -> None:
    _, env = local
    assert stat.S_IMODE(local_service.state_path().stat().st_mode) == 0o600
    served, modules = _assay("run", SUITE, "--outputs", V1, "--json", env=env)
    assert not {m for m in modules if m.startswith(("prefect", "typer"))}  # handed over
    assert _posted_runs() == 1
    here, modules = _assay("run", SUITE, "--outputs", V1, "--json", "--local", env=env)
    assert "prefect" in modules and _posted_runs() == 1
    assert _comparable(served) == _comparable(here)
    assert served["run_id"] != here["run_id"]
    gated, modules = _assay("gate", SUITE, "--outputs", V1, "--json", env=env)
    assert "prefect" not in modules and gated["verdict"] in ("pass", "fail")
    # An option the service does not take runs in the command's own process instead (the
    # command process's child), with the same answer.
    resumed, modules = _assay(
        "run", SUITE, "--outputs", V1, "--json", "--chunk-size", "7", "--workers", "1", env=env
    )
    assert _posted_runs() == 1 and resumed["metrics"] == served["metrics"]


def test_report_and_scorecard_go_through_the_local_service_too(
    local: tuple[local_service.LocalService, dict[str, str]], tmp_path: Path
) -> None:
    _, env = local
    served, _ = _assay("run", SUITE, "--outputs", V1, "--json", env=env)
    run_id = served["run_id"]
    cards, modules = _assay("scorecard", "--format", "json", env=env)
    assert "prefect" not in modules and "matplotlib" not in modules
    assert cards == _assay("scorecard", "--format", "json", "--local", env=env)[0]
    page = tmp_path / "served.html"
    ran = subprocess.run(
        [sys.executable, "-c", RUN, "report", run_id, "-o", str(page)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr
    assert "matplotlib" not in ran.stderr.rpartition(MODULES)[2].split()
    assert run_id in page.read_text(encoding="utf-8")


def test_a_command_on_another_store_runs_here(
    local: tuple[local_service.LocalService, dict[str, str]], tmp_path: Path
) -> None:
    _, env = local
    elsewhere = {**env, "ASSAY_STORE": f"file://{tmp_path / 'other-store'}"}
    result, _ = _assay("run", SUITE, "--outputs", V1, "--json", env=elsewhere)
    assert _posted_runs() == 0 and result["metrics"]["cases"] == 50
    assert (tmp_path / "other-store").is_dir()


def _in_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """What `assay ARGS` writes when a person runs it at a terminal (a pseudo-terminal)."""
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
        close_fds=True,
    )
    os.close(follower)
    written = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        written += chunk
    os.close(leader)
    shown = written.decode(errors="replace")
    assert process.wait(timeout=300) in (0, 1), shown
    return " ".join(shown.split())  # as read, not as the terminal's width wrapped it


def test_an_interactive_run_starts_the_local_service_and_ci_never_does(
    tmp_path: Path, prefect_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "prefect-home"
    monkeypatch.setenv("PREFECT_HOME", str(home))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_", "CI"))},
        "PREFECT_HOME": str(home),
        "PREFECT_API_URL": prefect_api,
        "ASSAY_STORE": f"file://{tmp_path / 'store'}",
    }
    command = ["run", SUITE, "--outputs", V1, "--sample", "5"]
    in_ci = _in_a_terminal(command, {**env, "CI": "true"})
    assert "started the local Assay server" not in in_ci
    assert local_service.read_state() is None  # nothing was started, nothing survives
    try:
        first = _in_a_terminal(command, env)
        assert "started the local Assay server (Prefect API" in first
        assert "assay server stop ends it" in first
        service = local_service.running()
        assert service is not None
        second = _in_a_terminal(command, env)
        assert "started the local Assay server" not in second
        log = local_service.log_path().read_text(encoding="utf-8")
        assert log.count("POST /runs") == 2  # both runs went through the service
    finally:
        local_service.stop()
