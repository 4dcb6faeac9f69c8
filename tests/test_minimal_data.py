"""Minimal data (SPEC §1.4): output text never reaches the store, Prefect's database or logs.

A canary string is planted in every candidate output; after real runs through the CLI and the
flow against a real Prefect API, every byte written is searched for it.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from tests.conftest import PREFECT_HOME
from tests.servers import S3Server

pytestmark = pytest.mark.usefixtures("prefect_api")

CANARY = "CANARY-7f3a9e-do-not-persist"


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _prefect_database_dir() -> Path:
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    url = str(PREFECT_SERVER_DATABASE_CONNECTION_URL.value())
    return Path(url.split("///", 1)[1]).parent


def _flush_prefect_logs() -> None:
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    time.sleep(1.0)  # the API server writes log batches asynchronously


def _canary_inputs(tmp_path: Path) -> tuple[Path, Path]:
    suite = {
        "suite": "canary",
        "cases": [
            {"id": "exact", "input": "q", "scorers": [{"exact": "hello"}]},
            {"id": "contains", "input": "q", "scorers": [{"contains": "refund"}]},
            {"id": "regex", "input": "q", "scorers": [{"regex": r"\b30 days\b"}]},
            {"id": "json", "input": "q", "scorers": [{"json_equal": {"value": {"a": 1}}}]},
            {"id": "number", "input": "q", "scorers": [{"numeric_range": {"min": 1, "max": 5}}]},
            {"id": "judge", "input": "q", "scorers": [{"llm_judge": "be kind"}]},
            {"id": "absent", "input": "q", "scorers": [{"contains": "x"}]},
        ],
    }
    suite_file = tmp_path / "canary.json"
    suite_file.write_text(json.dumps(suite))
    outputs = [
        {"case_id": "exact", "output": f"hello {CANARY}"},
        {"case_id": "contains", "output": f"a refund {CANARY}"},
        {"case_id": "regex", "output": f"within 30 days {CANARY}"},
        {"case_id": "json", "output": json.dumps({"a": 1, "note": CANARY})},
        {"case_id": "number", "output": f"3 items {CANARY}"},
        {"case_id": "judge", "output": CANARY},
    ]
    outputs_file = tmp_path / "outputs.jsonl"
    outputs_file.write_text("".join(json.dumps(o) + "\n" for o in outputs))
    return suite_file, outputs_file


def test_canary_never_written_by_a_run(
    store_dir: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    suite_file, outputs_file = _canary_inputs(tmp_path)
    needle = CANARY.encode()
    assert _files_containing(tmp_path, needle) == [outputs_file]  # the search does find it

    result = CliRunner().invoke(
        app, ["run", str(suite_file), "--outputs", str(outputs_file), "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    metrics = report["metrics"]
    assert (metrics["passed"], metrics["skipped"], metrics["missing"]) == (3, 1, 1)
    _flush_prefect_logs()

    assert any(store_dir.rglob("*.json")), "the run wrote evidence"
    assert _files_containing(store_dir, needle) == []
    assert _files_containing(PREFECT_HOME, needle) == []
    database = _prefect_database_dir()
    assert _files_containing(database, b"canary@1"), "the search reads Prefect's database"
    assert _files_containing(database, needle) == []
    captured = capfd.readouterr()
    assert CANARY not in result.output
    assert CANARY not in captured.out + captured.err
    assert CANARY not in caplog.text


def test_canary_not_echoed_by_input_errors(
    store_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    suite_file, _ = _canary_inputs(tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"case_id": "exact", "output": CANARY})
        + "\n"
        + json.dumps({"case_id": "contains", "output": CANARY, "duration_ms": "slow"})
        + "\n"
    )

    result = CliRunner().invoke(app, ["run", str(suite_file), "--outputs", str(bad)])
    _flush_prefect_logs()

    assert result.exit_code == 2
    assert f"{bad} line 2, field duration_ms" in result.output
    assert CANARY not in result.output
    assert CANARY not in caplog.text
    assert _files_containing(store_dir, CANARY.encode()) == []
    assert _files_containing(_prefect_database_dir(), CANARY.encode()) == []


def test_canary_never_reaches_the_s3_bucket_with_outputs_read_from_s3(
    s3_env: str, moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_STORE", s3_env)
    suite_file, outputs_file = _canary_inputs(tmp_path)
    lines = outputs_file.read_text().splitlines(keepends=True)
    client = moto_s3.client()
    drop = moto_s3.create_bucket()  # the sandbox's drop location, separate from the evidence
    client.put_object(Bucket=drop, Key="run-7/part-2.jsonl", Body="".join(lines[3:]).encode())
    client.put_object(Bucket=drop, Key="run-7/part-1.jsonl", Body="".join(lines[:3]).encode())
    client.put_object(Bucket=drop, Key="run-7/README.txt", Body=b"not outputs")

    result = CliRunner().invoke(
        app, ["run", str(suite_file), "--outputs", f"s3://{drop}/run-7/", "--json"]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["metrics"]
    assert (metrics["passed"], metrics["skipped"], metrics["missing"]) == (3, 1, 1)
    assert metrics["write_guard"] == "if-none-match"  # moto enforces conditional writes
    _flush_prefect_logs()

    bucket = s3_env.removeprefix("s3://").split("/", 1)[0]
    keys = [
        item["Key"]
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket)
        for item in page.get("Contents", [])
    ]
    assert any(key.endswith("/result.json") for key in keys)
    for key in keys:
        body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
        assert CANARY.encode() not in body, key
    assert _files_containing(_prefect_database_dir(), CANARY.encode()) == []
    assert CANARY not in result.output


def test_canary_in_tool_arguments_and_results_never_written_by_a_run(
    store_dir: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    suite = {
        "suite": "tool-canary",
        "cases": [
            {
                "id": case_id,
                "input": "q",
                "expected_trajectory": [{"tool": "lookup", "args": {"q": "x"}}],
                "scorers": [
                    {"trajectory": {"match": "exact"}},
                    {"tool_not_called": "delete_account"},
                    "tool_errors",
                ],
            }
            for case_id in ("right", "wrong")
        ],
    }
    suite_file = tmp_path / "tools.json"
    suite_file.write_text(json.dumps(suite))

    def messages(args: dict[str, str], tool: str = "lookup") -> list[dict[str, object]]:
        return [
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "t1", "function": {"name": tool, "arguments": json.dumps(args)}}
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": CANARY, "is_error": True},
            {"role": "assistant", "content": "done"},
        ]

    outputs_file = tmp_path / "tools.jsonl"
    outputs_file.write_text(
        json.dumps({"case_id": "right", "messages": messages({"q": "x"})})
        + "\n"
        + json.dumps({"case_id": "wrong", "messages": messages({"q": CANARY}, "delete_account")})
        + "\n"
    )
    needle = CANARY.encode()
    result = CliRunner().invoke(
        app, ["run", str(suite_file), "--outputs", str(outputs_file), "--json"]
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["metrics"]
    assert (metrics["passed"], metrics["failed"]) == (0, 2)  # both failed calls fail tool_errors
    _flush_prefect_logs()

    evidence = [p for p in store_dir.rglob("*.json") if b"delete_account" in p.read_bytes()]
    assert evidence, "the labels name the forbidden tool"
    assert _files_containing(store_dir, needle) == []
    assert _files_containing(PREFECT_HOME, needle) == []
    database = _prefect_database_dir()
    assert _files_containing(database, b"tool-canary@1"), "the search reads Prefect's database"
    assert _files_containing(database, needle) == []
    captured = capfd.readouterr()
    assert CANARY not in result.output + captured.out + captured.err + caplog.text


@pytest.mark.parametrize(
    ("setup", "recorded"),
    [
        ("agents-openinference", "traces.pb"),
        ("openai-v2-attributes", "traces.json"),
        ("langgraph-openinference", "messages.jsonl"),
        ("anthropic", "messages.jsonl"),
    ],
)
def test_canary_recorded_by_real_frameworks_never_written_by_a_run_or_its_report(
    store_dir: Path,
    tmp_path: Path,
    framework_recordings: dict[str, Path],
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    setup: str,
    recorded: str,
) -> None:
    """Every text, argument and tool result of the recordings carries the frameworks' canary."""
    from tests.frameworks.scenarios import CANARY as RECORDED_CANARY
    from tests.frameworks.scenarios import EXPECTED

    caplog.set_level(logging.DEBUG)
    outputs = framework_recordings[setup] / recorded
    needle = RECORDED_CANARY.encode()
    assert needle in outputs.read_bytes()
    checks = [
        {"trajectory": {"match": "in_order", "args": "ignore"}},
        {"tool_not_called": "delete_account"},
        "tool_errors",
        {"contains": "refunded"},
    ]
    cases = [
        {
            "id": case_id,
            "input": "q",  # the recorded prompts carry the canary: a suite may, outputs not
            "expected_trajectory": [{"tool": c["name"]} for step in e["steps"] for c in step],
            "scorers": checks,
        }
        for case_id, e in EXPECTED.items()
    ]
    suite_file = tmp_path / "frameworks.json"
    suite_file.write_text(json.dumps({"suite": "frameworks", "cases": cases}))
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(suite_file), "--outputs", str(outputs), "--json"])
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    shown = runner.invoke(app, ["report", run_id, "--output", str(store_dir / "report.html")])
    assert shown.exit_code == 0, shown.output
    _flush_prefect_logs()

    assert (store_dir / "report.html").is_file()
    assert _files_containing(store_dir, needle) == []
    assert _files_containing(PREFECT_HOME, needle) == []
    assert _files_containing(_prefect_database_dir(), needle) == []
    captured = capfd.readouterr()
    assert RECORDED_CANARY not in result.output + shown.output + captured.out + captured.err
    assert RECORDED_CANARY not in caplog.text
