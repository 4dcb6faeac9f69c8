"""The `assay` command line: contracts (commands, flags, exit codes, JSON keys)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from assay.cli import app
from tests.conftest import EXAMPLES

SUITE = EXAMPLES / "support-suite.yaml"
V1 = EXAMPLES / "outputs" / "support-bot-v1.jsonl"
RESULT_KEYS = {
    "run_id",
    "suite",
    "suite_version",
    "subject_kind",
    "subject_id",
    "variant",
    "score",
    "passed",
    "pass_rate",
    "occurred_at",
    "metrics",
}
METRIC_KEYS = {"cases", "scored", "passed", "failed", "skipped", "missing", "errors"}


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_publish_is_content_addressed_and_append_only(store_dir: Path, tmp_path: Path) -> None:
    code, text = invoke("suite", "publish", str(SUITE), "--json")
    assert code == 0
    first = json.loads(text)
    assert (first["suite"], first["version"], first["created"]) == ("support-bot", 1, True)

    code, text = invoke("suite", "publish", str(SUITE), "--json")
    assert json.loads(text)["version"] == 1 and json.loads(text)["created"] is False

    changed = yaml.safe_load(SUITE.read_text())
    changed["cases"][0]["input"] += " Please answer briefly."
    edited = tmp_path / "edited.yaml"
    edited.write_text(yaml.safe_dump(changed))
    code, text = invoke("suite", "publish", str(edited), "--json")
    assert (json.loads(text)["version"], json.loads(text)["created"]) == (2, True)

    code, text = invoke("suite", "show", "support-bot@1", "--json")
    assert code == 0
    assert (
        json.loads(text)["cases"][0]["input"]
        == yaml.safe_load(SUITE.read_text())["cases"][0]["input"]
    )
    rebuilt = tmp_path / "rebuilt.json"
    rebuilt.write_text(text)
    code, text = invoke("suite", "publish", str(rebuilt), "--json")
    assert json.loads(text)["version"] == 3  # v1's content again, after v2: a new version

    code, text = invoke("suite", "list", "--json")
    assert [(s["suite"], s["version"]) for s in json.loads(text)] == [("support-bot", 3)]


def test_show_human_output_and_missing_version(store_dir: Path) -> None:
    invoke("suite", "publish", str(SUITE))
    code, text = invoke("suite", "show", "support-bot")
    assert code == 0 and "support-bot@1" in text and "window-40-days" in text
    code, text = invoke("suite", "show", "support-bot@9")
    assert code == 2 and "support-bot@9 does not exist" in text
    code, text = invoke("suite", "show", "Not A Ref")
    assert code == 2 and "NAME@VERSION" in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("suite: x\ncases:\n  - id: a\n    input: 'unclosed\n", "line"),
        ("suite: x\ncases: []\n", "the suite has no cases"),
        ("suite: x\ncases:\n  - id: a\n    input: q\n    scorers: [{nope: 1}]\n", "unknown scorer"),
    ],
)
def test_bad_suite_exits_2_naming_file_and_line(
    store_dir: Path, tmp_path: Path, content: str, expected: str
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(content)
    code, text = invoke("run", str(bad), "--outputs", str(V1))
    assert code == 2
    assert f"{bad} line" in text and expected in text
    assert not store_dir.exists() or not any(store_dir.rglob("*.json"))


def test_usage_errors_exit_2(store_dir: Path) -> None:
    code, text = invoke("run", "never-published", "--outputs", str(V1))
    assert code == 2 and "never published" in text
    code, text = invoke("run", str(SUITE), "--outputs", str(V1), "--subject", "no-colon")
    assert code == 2 and "KIND:ID" in text
    code, text = invoke("run", str(SUITE), "--outputs", str(EXAMPLES / "nope.jsonl"))
    assert code == 2 and "no such outputs file" in text
    code, text = invoke("runs", "show", "no-such-run")
    assert code == 2 and "no run no-such-run" in text
    code, _ = invoke("run", str(SUITE))  # --outputs is required
    assert code == 2


@pytest.mark.usefixtures("prefect_api")
def test_run_json_contract_and_runs_commands(store_dir: Path) -> None:
    code, text = invoke(
        "run", str(SUITE), "--outputs", str(V1), "--subject", "agent:support-bot@v1", "--json"
    )
    assert code == 0, text
    result = json.loads(text)
    assert set(result) >= RESULT_KEYS
    assert set(result["metrics"]) >= METRIC_KEYS
    assert (result["suite"], result["suite_version"], result["variant"]) == ("support-bot", 1, "v1")
    assert (result["metrics"]["passed"], result["metrics"]["scored"]) == (45, 50)
    assert result["passed"] is True

    code, text = invoke("runs", "show", result["run_id"], "--json")
    assert code == 0 and json.loads(text) == result

    code, text = invoke("run", "support-bot@1", "--outputs", str(V1), "--json")
    assert code == 0 and json.loads(text)["subject_id"] == "support-bot-v1"

    code, text = invoke("runs", "list", "--json")
    listed = json.loads(text)
    assert len(listed) == 2 and {r["status"] for r in listed} == {"completed"}
    assert result["run_id"] in {r["run_id"] for r in listed}

    code, text = invoke("runs", "show", result["run_id"])
    assert code == 0 and "45/50" in text and "PASSED" in text
