"""An 80-column terminal cuts nothing a person needs next: run ids and subjects wrap instead of
being cut with `…`, `runs show` takes a unique prefix of a run id (as git takes a commit's), and
output that is not a terminal (a CI log) is not hard-wrapped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.usefixtures("prefect_api")

SUITE = str(EXAMPLES / "support-suite.yaml")
NARROW = {"COLUMNS": "80"}


def _runs(store_dir: Path) -> list[dict[str, object]]:
    runner = CliRunner()
    for version in ("v1", "v2"):
        outputs = str(EXAMPLES / "outputs" / f"support-bot-{version}.jsonl")
        subject = f"agent:support-bot@{version}"
        done = runner.invoke(app, ["run", SUITE, "--outputs", outputs, "--subject", subject])
        assert done.exit_code == 0, done.output
    listed = runner.invoke(app, ["runs", "list", "--json"])
    runs: list[dict[str, object]] = json.loads(listed.stdout)
    return runs


def test_runs_list_and_scorecard_at_80_columns_cut_no_id_and_no_subject(store_dir: Path) -> None:
    runs = _runs(store_dir)
    runner = CliRunner()
    for command in (["runs", "list"], ["scorecard"]):
        shown = runner.invoke(app, command, env=NARROW)
        assert shown.exit_code == 0, shown.output
        assert "…" not in shown.output, shown.output  # wrapped, never cut
        assert max(len(line) for line in shown.output.splitlines()) <= 80
        assert "v1" in shown.output and "v2" in shown.output
        if command == ["runs", "list"]:
            for run in runs:
                assert str(run["run_id"])[:8] in shown.output


def test_runs_show_takes_a_unique_prefix_and_names_an_ambiguous_one(store_dir: Path) -> None:
    runs = _runs(store_dir)
    runner = CliRunner()
    first = str(runs[0]["run_id"])
    shown = runner.invoke(app, ["runs", "show", first[:8], "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["run_id"] == first

    short = runner.invoke(app, ["runs", "show", first[:3]])
    assert short.exit_code == 2 and "at least 4 characters" in short.output
    ids = [str(run["run_id"]) for run in runs]
    common = os.path.commonprefix(ids)  # noqa: RUF071 - run ids are strings, not paths
    if len(common) >= 4:  # two uuids rarely share 4 characters; when they do, it is refused
        ambiguous = runner.invoke(app, ["runs", "show", common])
        assert ambiguous.exit_code == 2 and "prefix of 2 runs" in ambiguous.output
    unknown = runner.invoke(app, ["runs", "show", "ffffffff-none"])
    assert unknown.exit_code == 2 and "no run ffffffff-none" in unknown.output


def test_output_that_is_not_a_terminal_is_not_hard_wrapped(store_dir: Path) -> None:
    long_subject = "agent:" + "a-rather-long-subject-name-" * 4 + "x"
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    outputs = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "assay.cli",
            "run",
            SUITE,
            "--outputs",
            outputs,
            "--subject",
            long_subject,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (headline,) = [line for line in done.stdout.splitlines() if long_subject in line]
    assert "PASSED" in headline  # one line, however long: not wrapped at 80 columns
