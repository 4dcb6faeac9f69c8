"""A baseline must be a run of the same suite (else regression detection would silently read
`inconclusive_noise` and pass), and may be named by a unique prefix like every run id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from tests.conftest import EXAMPLES
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

SUITE = str(EXAMPLES / "support-suite.yaml")
V1 = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
V2 = str(EXAMPLES / "outputs" / "support-bot-v2.jsonl")


def test_a_baseline_of_another_suite_is_refused_naming_both(store_dir: Path) -> None:
    other = suite_run(
        suite=str(EXAMPLES / "conversation-suite.yaml"),
        outputs=str(EXAMPLES / "outputs" / "conversation-v1.jsonl"),
        subject="agent:support-bot@v1",
    )
    done = CliRunner().invoke(
        app, ["run", SUITE, "--outputs", V2, "--baseline", other.run_id, "--local"]
    )
    assert done.exit_code == 2, done.output
    line = done.output.strip().splitlines()[-1]
    assert other.run_id in line and "support-conversations" in line and "support-bot" in line
    assert sum(1 for _ in (store_dir / "index" / "runs").iterdir()) == 1  # nothing else ran


def test_a_baseline_is_named_by_a_unique_prefix(store_dir: Path) -> None:
    first = suite_run(suite=SUITE, outputs=V1, subject="agent:support-bot@v1")
    done = CliRunner().invoke(
        app,
        ["run", SUITE, "--outputs", V2, "--baseline", first.run_id[:8], "--json", "--local"],
    )
    assert done.exit_code in (0, 1), done.output
    regression = json.loads(done.stdout)["regression"]
    assert (regression["baseline_run"], regression["baseline_source"]) == (first.run_id, "explicit")


def test_a_gate_is_rechecked_by_a_unique_prefix(store_dir: Path) -> None:
    first = suite_run(suite=SUITE, outputs=V1, subject="agent:support-bot@v1")
    gated = CliRunner().invoke(
        app, ["gate", SUITE, "--outputs", V1, "--baseline", first.run_id, "--json", "--local"]
    )
    run_id = json.loads(gated.stdout)["run_id"]
    checked = CliRunner().invoke(app, ["gate", "--check", run_id[:8], "--json"])
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["run_id"] == run_id
    what_if = CliRunner().invoke(
        app, ["gate", "--check", run_id[:8], "--pass-threshold", "0.99", "--json"]
    )
    assert what_if.exit_code == 1 and json.loads(what_if.stdout)["run_id"] == run_id
