"""Every command that takes a run id takes a unique prefix of one (4+ characters), resolved by the
one resolver `runs show` uses (`assay.runs.records.resolve_run_id`): `--resume`, `assay override`,
`assay audit --run` and `assay gate --check`. A prefix of several runs is one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from assay.cli import app
from assay.gate.access import Tier, add_principal
from assay.store import FileStore
from tests.launched import gate, suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

REASON = "the judge endpoint was down; a rerun with it up passed"


def _suite(tmp_path: Path, answer: str) -> tuple[str, str]:
    cases = [{"id": f"c{i}", "input": "q", "scorers": [{"contains": "yes"}]} for i in range(5)]
    suite = tmp_path / "prefixes.json"
    suite.write_text(json.dumps({"suite": "prefixes", "cases": cases}))
    outputs = tmp_path / f"{answer}.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": c["id"], "output": answer}) + "\n" for c in cases)
    )
    return str(suite), str(outputs)


def _invoke(*args: str, token: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env={"ASSAY_TOKEN": token, "COLUMNS": "400"})


def _one_line_exit_2(done: Result, *words: str) -> None:
    assert done.exit_code == 2, done.output
    (line,) = done.output.strip().splitlines()
    assert all(word in line for word in words), line


def test_resume_takes_a_unique_prefix_and_refuses_an_ambiguous_one(
    store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path, "yes")
    for run_id in ("pfx-resume-1", "pfx-resume-2", "solo-run-9f3e"):
        suite_run(suite=suite, outputs=outputs, subject="agent:bot", run_id=run_id)
    run = ["run", suite, "--outputs", outputs, "--subject", "agent:bot", "--json", "--local"]

    # A resume of a completed run stands: the same run, named by its prefix.
    named = _invoke(*run, "--resume", "solo-run")
    assert named.exit_code == 0, named.output
    assert json.loads(named.stdout)["run_id"] == "solo-run-9f3e"

    both = _invoke(*run, "--resume", "pfx-resume")
    _one_line_exit_2(both, "prefix of 2 runs", "pfx-resume-1", "pfx-resume-2")
    _one_line_exit_2(_invoke(*run, "--resume", "zzzz-none"), "no run 'zzzz-none' to resume")


def test_override_audit_and_check_take_a_unique_prefix(store_dir: Path, tmp_path: Path) -> None:
    suite, outputs = _suite(tmp_path, "no")  # every case fails: the gate fails
    failed = gate(suite=suite, outputs=outputs, subject="agent:bot", run_id="gated-prefix-a1")
    gate(suite=suite, outputs=outputs, subject="agent:bot", run_id="gated-prefix-b2")
    assert failed.decision.verdict == "fail"
    admin = add_principal(FileStore(store_dir), "alice", Tier.ADMIN)

    granted = _invoke("override", "gated-prefix-a", "--reason", REASON, "--json", token=admin)
    assert granted.exit_code == 0, granted.output
    assert json.loads(granted.stdout)["run_id"] == "gated-prefix-a1"

    audited = _invoke("audit", "--run", "gated-prefix-a", "--json")
    assert audited.exit_code == 0, audited.output
    assert [(r["run_id"], r["outcome"]) for r in json.loads(audited.stdout)] == [
        ("gated-prefix-a1", "granted")
    ]
    checked = _invoke("gate", "--check", "gated-prefix-a", "--json")
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["effective"] == "pass"

    both = ("prefix of 2 runs", "gated-prefix-a1", "gated-prefix-b2")
    _one_line_exit_2(_invoke("audit", "--run", "gated-prefix"), *both)
    _one_line_exit_2(_invoke("gate", "--check", "gated-prefix"), *both)
    _one_line_exit_2(_invoke("override", "gated-prefix", "--reason", REASON, token=admin), *both)
    assert len(json.loads(_invoke("audit", "--json").stdout)) == 1  # nothing more audited
