"""A run with too little coverage does not pass: a broken judge cannot let the rest decide.

Against the local judge server (real `openai` SDK over HTTP) and a real Prefect API: with the
judge answering garbage, 500 or 401, a 5-case suite whose 4 cases carry only `llm_judge` checks
scores 1 of 5 cases, and the run is `passed: false` with `coverage 1/5 below 0.95` in the
EvalResult, the Prefect summary artifact and the CLI output.
"""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId
from typer.testing import CliRunner

from assay.cli import app
from assay.runs.chunks import read_cases
from assay.runs.metrics import RunMetrics, run_verdict
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite, parse_suite
from blocks import FinOpsBudget
from tests.judge_server import JudgeServer, Reply, malformed, server_error
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

REASON = "coverage 1/5 below 0.95"
EXAMPLE_HASH = "sha256:11a5b476bed0df93a61c33827924145c3b7752a957955e2beb7e95ea98697ad3"
"""The example suite's content address before `min_coverage` existed: it must not change."""


def _judge_only_suite(tmp_path: Path, **fields: object) -> tuple[Path, Path]:
    cases = [
        {"id": f"judged-{n}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Is polite."}}]}
        for n in range(4)
    ] + [{"id": "plain", "input": "q", "scorers": [{"contains": "ok"}]}]
    suite = tmp_path / "judged.json"
    suite.write_text(json.dumps({"suite": "judged", **fields, "cases": cases}))
    outputs = tmp_path / "out.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": c["id"], "output": "ok"}) + "\n" for c in cases)
    )
    return suite, outputs


@pytest.mark.parametrize(
    "reply",
    [malformed("garbage, not a verdict"), server_error(500), Reply(status=401, message="bad key")],
    ids=["garbage", "500", "401"],
)
def test_a_broken_judge_cannot_pass_a_run_on_the_one_deterministic_case(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, reply: Reply
) -> None:
    judge_env.script(default=reply)
    suite, outputs = _judge_only_suite(tmp_path)

    result = suite_run(suite=str(suite), outputs=str(outputs), subject="agent:bot@v1")

    m = result.metrics
    assert (m.cases, m.scored, m.passed, m.skipped) == (5, 1, 1, 4)
    assert result.pass_rate == 1.0
    assert result.passed is False
    assert result.verdict_reason == REASON
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(result.run_id)])
            )
        )
    (summary,) = [a for a in artifacts if a.key and a.key.endswith("-summary")]
    assert REASON in str(summary.data)


def test_the_cli_says_why_a_run_with_too_little_coverage_did_not_pass(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=malformed("garbage, not a verdict"))
    suite, outputs = _judge_only_suite(tmp_path)

    shown = CliRunner().invoke(app, ["run", str(suite), "--outputs", str(outputs)])
    as_json = CliRunner().invoke(app, ["run", str(suite), "--outputs", str(outputs), "--json"])

    assert shown.exit_code == 0, shown.output
    assert "DID NOT PASS" in shown.output and REASON in shown.output
    result = json.loads(as_json.stdout)
    assert (result["passed"], result["verdict_reason"]) == (False, REASON)


def test_a_suite_may_lower_its_coverage_floor(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=Reply(status=401, message="bad key"))
    suite, outputs = _judge_only_suite(tmp_path, min_coverage=0.2)

    result = suite_run(suite=str(suite), outputs=str(outputs), subject="agent:bot@v1")

    assert (result.passed, result.verdict_reason, result.min_coverage) == (True, None, 0.2)


def test_coverage_is_checked_before_the_pass_rate() -> None:
    metrics = RunMetrics(cases=10, scored=5, passed=1, failed=4, skipped=5)
    assert run_verdict(metrics, 0.8, 0.95) == (False, "coverage 5/10 below 0.95")
    assert run_verdict(metrics, 0.8, 0.5) == (False, "pass rate 1/5 below 0.8")
    assert run_verdict(RunMetrics(cases=20, scored=19, passed=19), 0.8, 0.95) == (True, None)


def test_a_suite_without_the_field_keeps_its_content_address(store_dir: Path) -> None:
    example = Path(__file__).resolve().parent.parent / "examples" / "support-suite.yaml"
    suite = load_suite(example)
    assert suite.min_coverage == 0.95
    assert "min_coverage" not in suite.canonical.text  # at its default: hash as before
    assert suite.content_hash == EXAMPLE_HASH
    assert suite.document()["min_coverage"] == 0.95  # the full form shows it
    stricter = parse_suite(
        example.read_text().replace("pass_threshold:", "min_coverage: 1.0\npass_threshold:", 1),
        "stricter.yaml",
    )
    assert stricter.content_hash != suite.content_hash
    store = FileStore(store_dir)
    first, _ = registry.publish(store, suite)
    second, created = registry.publish(store, stricter)
    assert (second.version, created) == (first.version + 1, True)
    assert registry.resolve(store, second.ref)[1].min_coverage == 1.0


# --- coverage by checks (fail closed, part 2) ----------------------------------------------


def _mixed_suite(tmp_path: Path, cases: int = 20) -> tuple[Path, Path]:
    """Every case carries a deterministic check that passes *and* an `llm_judge` check."""
    suite = tmp_path / "mixed.json"
    suite.write_text(
        json.dumps(
            {
                "suite": "mixed",
                "cases": [
                    {
                        "id": f"m{n:02d}",
                        "input": "q",
                        "scorers": [{"contains": "ok"}, {"llm_judge": {"rubric": "Is polite."}}],
                    }
                    for n in range(cases)
                ],
            }
        )
    )
    outputs = tmp_path / "mixed.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": f"m{n:02d}", "output": "ok"}) + "\n" for n in range(cases))
    )
    return suite, outputs


def test_a_garbage_judge_on_mixed_cases_is_not_a_pass(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=malformed("garbage, not a verdict"))
    suite, outputs = _mixed_suite(tmp_path)

    result = suite_run(suite=str(suite), outputs=str(outputs), subject="agent:mixed@v1")

    m = result.metrics
    assert (m.cases, m.scored, m.passed, m.incomplete, m.not_judged) == (20, 0, 0, 20, 0)
    assert result.passed is False
    assert result.verdict_reason == "coverage 0/20 below 0.95"
    (case, *_) = read_cases(FileStore(store_dir), result.run_id)
    assert case.status == "skipped" and case.label.startswith("incomplete: 1 check not scored")


def test_a_budget_blocked_judge_on_mixed_cases_is_not_a_pass(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")  # a priced judge: the budget applies
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    suite, outputs = _mixed_suite(tmp_path)
    calls = len(judge_env.requests)
    FinOpsBudget(
        limit_usd=0.000001, period="day", mode="block", scope="subject:agent:mixed-budget"
    ).save("test-coverage-budget", overwrite=True)
    try:
        result = suite_run(suite=str(suite), outputs=str(outputs), subject="agent:mixed-budget@v1")
    finally:
        FinOpsBudget.delete("test-coverage-budget")  # type: ignore[attr-defined]

    assert len(judge_env.requests) == calls  # nothing was spent
    assert (result.metrics.scored, result.metrics.incomplete) == (0, 20)
    assert result.passed is False


def _mostly_judged_suite(tmp_path: Path) -> tuple[Path, Path]:
    """8 cases: 6 carry only `llm_judge` checks, 2 only deterministic ones."""
    cases = [
        {"id": f"j{n}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Is polite."}}]}
        for n in range(6)
    ] + [{"id": f"d{n}", "input": "q", "scorers": [{"contains": "ok"}]} for n in range(2)]
    suite = tmp_path / "mostly-judged.json"
    suite.write_text(json.dumps({"suite": "mostly-judged", "pass_threshold": 0.5, "cases": cases}))
    outputs = tmp_path / "mostly-judged.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": c["id"], "output": "ok"}) + "\n" for c in cases)
    )
    return suite, outputs


def test_no_judge_configured_leaves_judged_cases_out_with_a_declared_warning(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_JUDGE_MODEL", raising=False)
    suite, outputs = _mostly_judged_suite(tmp_path)

    shown = CliRunner().invoke(app, ["gate", str(suite), "--outputs", str(outputs), "--json"])

    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert report["verdict"] == "pass" and report["reasons"] == []
    m = report["result"]["metrics"]
    assert (m["cases"], m["scored"], m["passed"], m["not_judged"], m["incomplete"]) == (
        8,
        2,
        2,
        6,
        0,
    )
    (note,) = [w for w in report["warnings"] if w.startswith("6 case(s) not judged")]
    assert "j0, j1" in note
    rules = {rule["rule"]: rule for rule in report["rules"]}
    assert rules["coverage"]["passed"] and "2/2 (+ 6 not judged)" in rules["coverage"]["detail"]


def test_nothing_judged_and_nothing_else_never_passes(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_JUDGE_MODEL", raising=False)
    suite, outputs = _judge_only_suite(tmp_path)
    only_judged = json.loads(suite.read_text())
    only_judged["cases"] = only_judged["cases"][:4]
    suite.write_text(json.dumps(only_judged))
    outputs.write_text("".join(outputs.read_text().splitlines(keepends=True)[:4]))

    shown = CliRunner().invoke(app, ["gate", str(suite), "--outputs", str(outputs), "--json"])

    assert shown.exit_code == 1, shown.output
    report = json.loads(shown.stdout)
    assert {r["rule"] for r in report["reasons"]} == {"coverage", "pass_rate_below_threshold"}


def test_the_pass_rate_rule_speaks_only_of_the_pass_rate(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=malformed("garbage, not a verdict"))
    suite, outputs = _judge_only_suite(tmp_path, pass_threshold=0.5)

    shown = CliRunner().invoke(app, ["gate", str(suite), "--outputs", str(outputs), "--json"])

    report = json.loads(shown.stdout)
    rules = {rule["rule"]: rule for rule in report["rules"]}
    assert rules["pass_rate_below_threshold"]["passed"] is True
    assert "coverage" not in rules["pass_rate_below_threshold"]["detail"]
    assert rules["coverage"]["passed"] is False
    assert "coverage 0.200 (1/5) vs minimum 0.95" in rules["coverage"]["detail"]
