"""First contact: bad input is answered by the CLI process itself, before any flow run exists.

Every command that takes files runs as a real `assay` process pointed at the session's real
Prefect API; the test counts that API's flow runs before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import EXAMPLES

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
