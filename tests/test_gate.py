"""The CI gate: every rule failing alone, missing credentials as a declared warning, the CLI's
exit codes and JSON, JUnit XML read back by a JUnit parser, and `--check` after an override."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path

import junitparser
import pytest
import yaml
from typer.testing import CliRunner

from assay.calibration.labels import CalibrationItem
from assay.calibration.report import Targets, measure, record_report
from assay.cli import app
from assay.findings import list_findings
from assay.gate.junit import junit_xml
from assay.judge.port import JudgePin, Verdict
from assay.runs.chunks import read_cases
from assay.store import FileStore
from blocks import FinOpsBudget
from tests.conftest import PREFECT_HOME
from tests.judge_server import JudgeServer, malformed, verdict
from tests.launched import gate
from tests.test_admission import record_passing_admission
from tests.test_minimal_data import _files_containing, _flush_prefect_logs, _prefect_database_dir

pytestmark = pytest.mark.usefixtures("prefect_api")

CASES = 40
JUDGED = 10
CANARY = "CANARY-gate-0f3a-never-stored"


def _suite(tmp_path: Path, judged: bool = False) -> str:
    cases = []
    for i in range(CASES):
        scorers: list[dict[str, object]] = [{"contains": "ok"}]
        if judged and i < JUDGED:
            scorers.append({"llm_judge": {"rubric": "Answers politely."}})
        cases.append({"id": f"c{i:02d}", "input": f"question {i}", "scorers": scorers})
    path = tmp_path / ("judged.yaml" if judged else "plain.yaml")
    suite = {
        "suite": "gate-judged" if judged else "gate-plain",
        "pass_threshold": 0.6,
        "regression_threshold": 0.05,
        "cases": cases,
    }
    path.write_text(yaml.safe_dump(suite))
    return str(path)


def _outputs(tmp_path: Path, name: str, passing: int) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:02d}", "output": "ok, done" if i < passing else "no"})
            + "\n"
            for i in range(CASES)
        )
    )
    return str(path)


def _calibrate(store_dir: Path, judge: JudgePin) -> None:
    """Record a passing calibration report, and a passing admission, for exactly this judge
    (model pin, prompt version)."""
    at = datetime(2026, 11, 1, tzinfo=UTC)
    items = [
        CalibrationItem(
            item_id=f"i{i}",
            input="q",
            output="o",
            rubric="r",
            label="pass" if i % 2 else "fail",
            labeler="ana",
            labeled_at=at,
        )
        for i in range(40)
    ]
    verdicts = [
        Verdict(status=item.label, score=1.0 if item.label == "pass" else 0.0, reason="judged")
        for item in items
    ]
    report = measure(
        items,
        verdicts,
        report_id="cal-1",
        targets=Targets(),
        judge=JudgePin(**judge.model_dump()),
        calibration_set="set.jsonl",
        now=at,
    )
    assert report.passed
    record_report(FileStore(store_dir), report)
    record_passing_admission(FileStore(store_dir), judge)


def _calibrate_the_configured_judge(suite: str, outputs: str, store_dir: Path) -> None:
    """Run the gate once to learn the judge's pin, then record a passing calibration for it."""
    probe = gate(suite=suite, outputs=outputs, subject="agent:probe@v1")
    assert probe.result.judge is not None
    _calibrate(store_dir, probe.result.judge)


@pytest.fixture
def judge_env(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-gate-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    judge_server.script(default=verdict("pass", 0.9))
    return judge_server


def test_a_regression_alone_fails_the_gate(store_dir: Path, tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    baseline = gate(suite=suite, outputs=_outputs(tmp_path, "all", CASES), subject="agent:g@v1")
    assert baseline.decision.verdict == "pass" and baseline.decision.reasons == []

    candidate = gate(
        suite=suite,
        outputs=_outputs(tmp_path, "most", 30),
        subject="agent:g@v2",
        baseline=baseline.result.run_id,
    )
    decision = candidate.decision
    assert candidate.result.pass_rate == 0.75  # above the 0.6 threshold
    assert [r.rule for r in decision.reasons] == ["regressed"]
    assert "40/40 → 30/40" in decision.reasons[0].message
    assert [(r.rule, r.passed) for r in decision.rules] == [
        ("regressed", False),
        ("coverage", True),
        ("pass_rate_below_threshold", True),
        ("judge_uncalibrated", True),
        ("judge_not_admitted", True),
        ("judge_unavailable", True),
        ("budget_blocked", True),
    ]


def test_a_low_pass_rate_alone_fails_the_gate(store_dir: Path, tmp_path: Path) -> None:
    run = gate(suite=_suite(tmp_path), outputs=_outputs(tmp_path, "half", 20))
    assert [r.rule for r in run.decision.reasons] == ["pass_rate_below_threshold"]
    assert "20/40" in run.decision.reasons[0].message
    recorded = json.loads((store_dir / "gates" / f"{run.result.run_id}.json").read_text())
    assert recorded["verdict"] == "fail"


def test_an_uncalibrated_judge_alone_fails_the_gate_until_calibrated(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite, outputs = _suite(tmp_path, judged=True), _outputs(tmp_path, "all", CASES)
    first = gate(suite=suite, outputs=outputs, subject="agent:j@v1")
    assert [r.rule for r in first.decision.reasons] == ["judge_uncalibrated"]
    assert first.result.metrics.judge_calls == JUDGED
    assert first.decision.calibrated is False
    kinds = [f.kind for f in list_findings(FileStore(store_dir), first.result.run_id)]
    assert kinds == ["judge_uncalibrated"]

    assert first.result.judge is not None
    _calibrate(store_dir, first.result.judge)
    second = gate(suite=suite, outputs=outputs, subject="agent:j@v1")
    assert second.decision.verdict == "pass", second.decision.reasons
    assert second.decision.calibrated is True

    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-gate-2")  # a new pin starts uncalibrated
    third = gate(suite=suite, outputs=outputs, subject="agent:j@v1")
    assert [r.rule for r in third.decision.reasons] == ["judge_uncalibrated"]
    assert third.result.judge is not None and third.result.judge.model == "judge-gate-2"


def test_a_judge_outage_alone_fails_the_gate(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path, judged=True), _outputs(tmp_path, "all", CASES)
    _calibrate_the_configured_judge(suite, outputs, store_dir)

    judge_env.script(default=malformed())  # the judge answers, but never with a verdict
    run = gate(suite=suite, outputs=outputs, subject="agent:outage@v1", fresh_judge=True)
    decision = run.decision
    # The unjudged cases are incomplete: they fail coverage too, never count as passed.
    assert [r.rule for r in decision.reasons] == ["coverage", "judge_unavailable"]
    assert decision.unjudged_cases == [f"c{i:02d}" for i in range(JUDGED)]
    assert run.result.pass_rate == 1.0  # the deterministic checks passed
    assert not run.result.passed and run.result.metrics.incomplete == JUDGED
    assert not any("not judged" in w for w in decision.warnings)  # a failure, not a warning


def test_a_blocked_budget_alone_fails_the_gate(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path, judged=True), _outputs(tmp_path, "all", CASES)
    _calibrate_the_configured_judge(suite, outputs, store_dir)
    calls = len(judge_env.requests)

    FinOpsBudget(
        limit_usd=0.000001, period="day", mode="block", scope="subject:agent:budget-gate"
    ).save("test-gate-budget", overwrite=True)
    try:
        run = gate(suite=suite, outputs=outputs, subject="agent:budget-gate@v1", fresh_judge=True)
    finally:
        FinOpsBudget.delete("test-gate-budget")  # type: ignore[attr-defined]
    assert len(judge_env.requests) == calls  # nothing was spent
    assert [r.rule for r in run.decision.reasons] == ["coverage", "budget_blocked"]
    assert run.result.metrics.skipped_checks == JUDGED
    assert not run.result.passed and run.result.metrics.incomplete == JUDGED


def test_missing_credentials_are_a_warning_that_lists_the_unjudged_cases(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    run = gate(suite=_suite(tmp_path, judged=True), outputs=_outputs(tmp_path, "all", CASES))
    decision = run.decision
    assert decision.verdict == "pass" and decision.reasons == []
    assert judge_env.requests == []
    assert decision.unjudged_cases == [f"c{i:02d}" for i in range(JUDGED)]
    (note,) = [w for w in decision.warnings if "not judged" in w]
    assert note.startswith("10 case(s) not judged (no judge or no credentials): c00, c01")

    xml = junit_xml(decision, list(read_cases(FileStore(store_dir), run.result.run_id)))
    (cases_suite, _rules) = junitparser.JUnitXml.fromstring(xml)
    assert (cases_suite.tests, cases_suite.failures, cases_suite.skipped) == (CASES, 0, JUDGED)
    shown_skipped = [c.name for c in cases_suite if c.is_skipped]
    assert shown_skipped == decision.unjudged_cases  # unjudged is never reported as passed


def test_cli_exit_codes_json_junit_and_check_after_an_override(
    store_dir: Path, tmp_path: Path
) -> None:
    runner = CliRunner()
    suite, outputs, junit = _suite(tmp_path), _outputs(tmp_path, "half", 20), tmp_path / "j.xml"

    result = runner.invoke(
        app, ["gate", suite, "--outputs", outputs, "--json", "--junit", str(junit)]
    )
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    assert payload["verdict"] == "fail" and payload["effective_verdict"] == "fail"
    assert [r["rule"] for r in payload["reasons"]] == ["pass_rate_below_threshold"]
    assert {"warnings", "run_id", "result"} <= set(payload)
    assert payload["result"]["metrics"]["passed"] == 20
    run_id = payload["run_id"]

    xml = junitparser.JUnitXml.fromfile(str(junit))
    suites = {s.name: s for s in xml}
    cases_suite = suites["gate-plain@1 · agent:half"]
    assert (cases_suite.tests, cases_suite.failures, cases_suite.skipped) == (CASES, 20, 0)
    failing = [c.name for c in cases_suite if not c.is_passed]
    assert failing == [f"c{i:02d}" for i in range(20, CASES)]
    rules = {c.name: c.is_passed for c in suites["assay gate rules"]}
    assert rules == {
        "regressed": True,
        "coverage": True,
        "pass_rate_below_threshold": False,
        "judge_uncalibrated": True,
        "judge_not_admitted": True,
        "judge_unavailable": True,
        "budget_blocked": True,
    }

    assert runner.invoke(app, ["gate", "--check", run_id]).exit_code == 1
    token = runner.invoke(app, ["access", "add", "root", "--tier", "admin"]).stdout.strip()
    granted = runner.invoke(
        app,
        ["override", run_id, "--reason", "Threshold recalibrated for the holiday catalogue"],
        env={"ASSAY_TOKEN": token},
    )
    assert granted.exit_code == 0, granted.output
    check = runner.invoke(app, ["gate", "--check", run_id, "--json"])
    assert check.exit_code == 0
    assert (json.loads(check.stdout)["recorded"], json.loads(check.stdout)["effective"]) == (
        "fail",
        "pass",
    )


def test_cli_usage_and_input_errors_exit_2(store_dir: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["gate"]).exit_code == 2
    assert runner.invoke(app, ["gate", _suite(tmp_path)]).exit_code == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("suite: x\ncases: [\n")
    result = runner.invoke(app, ["gate", str(bad), "--outputs", _outputs(tmp_path, "o", 1)])
    assert result.exit_code == 2 and "bad.yaml" in result.stderr
    assert runner.invoke(app, ["gate", "--check", "no-such-run"]).exit_code == 2


def test_no_output_text_reaches_evidence_prefect_logs_or_junit(
    judge_env: JudgeServer,
    store_dir: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    judge_env.script(default=verdict("fail", 0.2, reasoning=f"because {CANARY}-R"))
    outputs = tmp_path / "canary.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:02d}", "output": f"ok {CANARY} {i}"}) + "\n"
            for i in range(CASES)
        )
    )
    junit = tmp_path / "gate.xml"
    command = ["gate", _suite(tmp_path, judged=True), "--outputs", str(outputs)]
    result = CliRunner().invoke(app, [*command, "--json", "--junit", str(junit)])
    assert result.exit_code == 1, result.output  # judged checks failed; the judge is uncalibrated
    assert len(judge_env.requests) == JUDGED

    _flush_prefect_logs()
    needle = CANARY.encode()
    assert _files_containing(tmp_path, needle) == [outputs]  # the search does find it
    assert _files_containing(PREFECT_HOME, needle) == []
    assert _files_containing(_prefect_database_dir(), needle) == []
    captured = capfd.readouterr()
    assert CANARY not in result.output + captured.out + captured.err + caplog.text
