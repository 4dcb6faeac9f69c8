"""First contact: bad input is answered by the CLI process itself, before any flow run exists.

Every command that takes files runs as a real `assay` process pointed at the session's real
Prefect API; the test counts that API's flow runs before and after.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.store import FileStore
from tests.conftest import EXAMPLES
from tests.servers import free_port
from tests.test_costs_cli import spend

SUITE = EXAMPLES / "support-suite.yaml"
GOOD_OUTPUTS = EXAMPLES / "outputs" / "support-bot-v1.jsonl"


def _assay(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )


def _flow_runs(api: str) -> int:
    response = httpx.post(f"{api}/flow_runs/count", json={}, timeout=30)
    response.raise_for_status()
    return int(response.json())


def _bad_outputs(tmp_path: Path) -> Path:
    lines = GOOD_OUTPUTS.read_text().splitlines()
    bad = tmp_path / "bad-outputs.jsonl"
    bad.write_text("\n".join([lines[0], lines[1], '{"case_id": "x", "output": ']) + "\n")
    return bad


def _malformed(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_text('{"broken": \n')
    return path


BAD_LINE = "line 3"


@pytest.fixture
def cli_env(prefect_api: str, store_dir: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PREFECT_API_URL": prefect_api,
        "ASSAY_STORE": f"file://{store_dir}",
        "COLUMNS": "200",
    }


def _commands(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Each command with a bad file, and the `file line N` its one line must name."""
    bad = _bad_outputs(tmp_path)
    bad_suite = tmp_path / "bad-suite.yaml"
    bad_suite.write_text("suite: Not A Slug\ncases: []\n")
    return {
        "run": (["run", str(SUITE), "--outputs", str(bad)], f"{bad} {BAD_LINE}"),
        "gate": (["gate", str(SUITE), "--outputs", str(bad)], f"{bad} {BAD_LINE}"),
        "compare": (
            ["compare", str(SUITE), "--a", str(GOOD_OUTPUTS), "--b", str(bad)],
            f"{bad} {BAD_LINE}",
        ),
        "label": (
            ["label", str(SUITE), "--outputs", str(bad), "--into", str(tmp_path / "labels.jsonl")],
            f"{bad} {BAD_LINE}",
        ),
        "calibrate": (["calibrate", str(_malformed(tmp_path, "set.jsonl"))], "set.jsonl line 1"),
        "release": (["release", str(_malformed(tmp_path, "trials.jsonl"))], "trials.jsonl line 1"),
        "outcome": (
            ["outcome", str(_malformed(tmp_path, "records.jsonl"))],
            "records.jsonl line 1",
        ),
        "monitor": (
            ["monitor", str(_malformed(tmp_path, "signals.jsonl"))],
            "signals.jsonl line 1",
        ),
        "suite publish": (["suite", "publish", str(bad_suite)], "bad-suite.yaml"),
        "mistyped suite path": (
            ["run", str(tmp_path / "suites" / "support.yaml"), "--outputs", str(GOOD_OUTPUTS)],
            "no such suite file",
        ),
    }


@pytest.mark.parametrize(
    "command",
    [
        "run",
        "gate",
        "compare",
        "label",
        "calibrate",
        "release",
        "outcome",
        "monitor",
        "suite publish",
        "mistyped suite path",
    ],
)
def test_bad_file_exits_2_with_one_line_and_no_flow_run(
    command: str, cli_env: dict[str, str], prefect_api: str, tmp_path: Path
) -> None:
    args, names = _commands(tmp_path)[command]
    before = _flow_runs(prefect_api)
    done = _assay(*args, env=cli_env, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and names in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    assert done.stdout == ""
    assert _flow_runs(prefect_api) == before


def test_lasting_server_is_used_and_linked_then_ephemeral_fallback_says_so(
    tmp_path: Path, store_dir: Path
) -> None:
    """`assay server start` launches Prefect's own server (a real process, fresh PREFECT_HOME,
    free port) and the local Assay service; `assay run` then goes through the service, records
    its run there and prints the run's UI link; after
    `assay server stop` the next run falls back to an ephemeral API and says how to get a UI."""
    port = free_port()
    home = tmp_path / "prefect-home"
    env = {k: v for k, v in os.environ.items() if k not in {"PREFECT_API_URL", "PREFECT_UI_URL"}}
    env |= {"PREFECT_HOME": str(home), "ASSAY_STORE": f"file://{store_dir}", "COLUMNS": "200"}
    run = ["run", str(SUITE), "--outputs", str(GOOD_OUTPUTS)]
    started = _assay("server", "start", "--port", str(port), env=env, cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"http://127.0.0.1:{port}" in started.stdout
        assert (home / "server.pid").exists()  # Prefect's own background server
        status = _assay("server", "status", "--json", env=env, cwd=tmp_path)
        assert status.returncode == 0 and '"running": true' in status.stdout
        assert isinstance(json.loads(status.stdout)["service"]["commands_pid"], int)
        block_types = httpx.post(
            f"http://127.0.0.1:{port}/api/block_types/filter", json={}, timeout=30
        ).json()
        assert {"assay-evidence-storage", "assay-finops-budget", "assay-judge-settings"} <= {
            block_type["slug"] for block_type in block_types
        }  # the UI's Blocks page can create Assay's blocks

        done = _assay(*run, env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        match = re.search(
            rf"http://127\.0\.0\.1:{port}/runs/flow-run/([0-9a-f-]{{36}})", done.stderr
        )
        assert match is not None, done.stderr
        api = f"http://127.0.0.1:{port}/api"
        flow_run = httpx.get(f"{api}/flow_runs/{match.group(1)}", timeout=30).json()
        assert flow_run["name"] == "support-bot@1 · agent:support-bot-v1"
        assert {"assay", "suite:support-bot", "subject:agent:support-bot-v1"} <= set(
            flow_run["tags"]
        )
        assert "INFO" not in done.stderr  # the terminal stays quiet without -v
        assert "runs through the local Assay service" in done.stderr  # `server start` runs it
        verbose = _assay("-v", *run, "--local", env=env, cwd=tmp_path)  # logs: in this process
        assert verbose.returncode == 0, verbose.stderr
        assert "INFO" in verbose.stderr and "chunk 0: 50 case(s)" in verbose.stderr
        # The UI on a non-4200 port is told where its API is.
        settings = httpx.get(f"http://127.0.0.1:{port}/ui-settings", timeout=30).json()
        assert settings["api_url"] == api
    finally:
        stopped = _assay("server", "stop", env=env, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    status = _assay("server", "status", env=env, cwd=tmp_path)
    assert status.returncode == 1 and "not running" in status.stdout

    fallback = _assay(*run, env=env, cwd=tmp_path)
    assert fallback.returncode == 0, fallback.stdout + fallback.stderr
    assert "/runs/flow-run/" not in fallback.stderr
    assert fallback.stderr.count("assay server start") == 1


def _help(*command: str) -> str:
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    return result.output


def test_help_keeps_text_in_square_brackets() -> None:
    assert "published NAME[@VERSION]" in _help("run")
    assert "KIND:ID[@VARIANT], e.g. agent:bot@v2 (default: agent:OUTPUTS-NAME" in _help("gate")
    assert "Block name ([a-z0-9-])" in _help("store", "save")
    assert "that has an llm_judge check" in _help("compare")


def test_costs_warns_when_judge_calls_were_not_priced(store_dir: Path) -> None:
    store = FileStore(store_dir)
    at = datetime(2024, 5, 2, 12, tzinfo=UTC)
    spend(store, at, run="priced", cost_usd=0.5)
    args = ["costs", "--since", "2024-05-01", "--until", "2024-05-03", "--by", "suite"]
    priced = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert priced.exit_code == 0 and "warning" not in priced.output
    spend(store, at, run="unpriced", cost_usd=0.0, suite="billing", calls=3)
    unpriced = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert unpriced.exit_code == 0
    assert "judge calls priced at $0 in 1 suite group(s) (billing)" in unpriced.output
    assert "no price was set" in unpriced.output
