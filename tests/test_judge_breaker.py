"""The judge circuit: a judge that never answers fails a run closed in seconds, not hours.

Against the scripted judge server (`tests/judge_server.py`) with the real `openai` SDK: a
2,000-check run through `assay run` (the real suite-run path, on the session's Prefect API)
whose judge hangs; and the judging service asked directly, one call at a time, to show which
replies open the circuit, which start its count again, and that it closes after its time.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.hashing import OutputHasher, store_secret
from assay.judge import circuit
from assay.judge.cache import cache_key
from assay.judge.circuit import BREAKER_FAILURES, CIRCUIT_OPEN, CIRCUIT_OPEN_WHY
from assay.judge.config import AUTO_START_CONCURRENCY
from assay.judge.openai_adapter import OpenAIJudge
from assay.judge.port import JudgeRequest
from assay.judge.prompts import load_prompt
from assay.judge.service import JudgeSetup, judge_repeated
from assay.judge.spending import Spender
from assay.store import FileStore
from tests.judge_server import JudgeServer, Reply, malformed, slow, verdict

CHECKS = 2000
FAILS_CLOSED_WITHIN_SECONDS = 120.0
"""The issue's bound for a 2,000-check run whose judge never answers (it took ~8 h)."""
MODEL = "judge-test-1"
NOT_FOUND = Reply(status=404, message="no such model")
"""Not transient and not a mode rejection: one request, then `judge unavailable: NotFoundError`."""


def _judged_suite(tmp_path: Path, cases: int) -> tuple[Path, Path]:
    rows = [
        {"id": f"c{i:04d}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Is polite."}}]}
        for i in range(cases)
    ]
    suite = tmp_path / "hung-judge.json"
    suite.write_text(json.dumps({"suite": "hung-judge", "cases": rows}))
    outputs = tmp_path / "out.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": r["id"], "output": "yes"}) + "\n" for r in rows)
    )
    return suite, outputs


@pytest.mark.usefixtures("prefect_api")
def test_a_judge_that_never_answers_fails_a_2000_check_run_closed_in_seconds(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    judge_env.script(default=slow(300))  # accepts every request, answers none
    monkeypatch.setenv("ASSAY_JUDGE_TIMEOUT_SECONDS", "0.5")
    monkeypatch.setenv("ASSAY_JUDGE_DEADLINE_SECONDS", "1")
    suite, outputs = _judged_suite(tmp_path, CHECKS)

    started = time.monotonic()
    shown = CliRunner().invoke(app, ["run", str(suite), "--outputs", str(outputs)])
    elapsed = time.monotonic() - started

    assert shown.exit_code == 0, shown.output  # a run that did not pass is still a run
    assert elapsed < FAILS_CLOSED_WITHIN_SECONDS, elapsed
    assert "DID NOT PASS — coverage 0/2000 below 0.95" in shown.output
    (run_id,) = [line.split()[-1] for line in shown.output.splitlines() if "  run " in line]
    result = json.loads(CliRunner().invoke(app, ["runs", "show", run_id, "--json"]).stdout)
    m = result["metrics"]
    assert (result["passed"], m["scored"], m["passed"], m["skipped"]) == (False, 0, 0, CHECKS)
    not_sent = m["unavailable"][f"llm_judge: {CIRCUIT_OPEN_WHY}"]
    # The circuit opened after BREAKER_FAILURES failed calls; those still in flight were abandoned.
    in_flight = AUTO_START_CONCURRENCY  # the default window starts there; timeouts only halve it
    assert CHECKS - BREAKER_FAILURES - in_flight <= not_sent <= CHECKS - BREAKER_FAILURES
    assert f"{not_sent} llm_judge checks unavailable: {CIRCUIT_OPEN_WHY}" in shown.output
    # Two attempts a call at most (0.5 s each within the 1 s deadline), few calls.
    assert len(judge_env.requests) <= 2 * (BREAKER_FAILURES + in_flight)


def _setup(judge_server: JudgeServer) -> JudgeSetup:
    return JudgeSetup(
        make_judge=lambda: OpenAIJudge(MODEL, base_url=judge_server.base_url, api_key="test"),
        skip_reason="",
        model=MODEL,
        prompt_version=load_prompt().version,
        max_concurrency=1,  # one call at a time: the script's order is the calls' order
    )


def _ask(store: FileStore, setup: JudgeSetup, run_id: str, first: int, count: int) -> list[str]:
    """Ask `count` distinct checks of run `run_id`; the reason of each verdict, in order."""
    hasher = OutputHasher(store_secret(store))
    requests = [
        (
            cache_key(hasher, "check", setup.pin, {"case": f"c{i}"}),
            JudgeRequest(case_id=f"c{i}", input="q", rubric="Is polite.", output="yes"),
        )
        for i in range(first, first + count)
    ]
    spender = Spender(run_id, "suite", "agent:bot", datetime.now(UTC))
    _, repeats = judge_repeated(store, setup, requests, spender, chunk=0)
    return [verdicts[0].reason for verdicts in repeats]


def test_only_consecutive_failures_open_the_circuit_and_it_closes_after_its_time(
    judge_server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, setup = FileStore(tmp_path / "evidence"), _setup(judge_server)
    failing = [NOT_FOUND] * (BREAKER_FAILURES - 1)
    judge_server.script(
        *failing,
        verdict("pass", 0.9),  # a verdict starts the count again
        *failing,
        malformed(),  # so does a malformed reply (asked once more): the judge is there
        malformed(),
        *[NOT_FOUND] * BREAKER_FAILURES,
        default=verdict("pass", 0.9),
    )
    run, other_run = f"run-{uuid.uuid4()}", f"run-{uuid.uuid4()}"
    unavailable = "judge unavailable: NotFoundError"

    reasons = _ask(store, setup, run, 0, 30)

    tripped = 2 * (BREAKER_FAILURES - 1) + 2 + BREAKER_FAILURES  # calls until it opened
    assert reasons[:tripped] == [
        *[unavailable] * (BREAKER_FAILURES - 1),
        "judged",
        *[unavailable] * (BREAKER_FAILURES - 1),
        "malformed reply",
        *[unavailable] * BREAKER_FAILURES,
    ]
    assert reasons[tripped:] == [CIRCUIT_OPEN] * (30 - tripped)
    assert len(judge_server.requests) == tripped + 1  # the malformed reply was asked twice

    # Another chunk of the same run is not sent; another run has its own circuit.
    assert _ask(store, setup, run, 30, 5) == [CIRCUIT_OPEN] * 5
    assert len(judge_server.requests) == tripped + 1
    assert _ask(store, setup, other_run, 0, 2) == ["judged"] * 2

    monkeypatch.setattr(circuit, "BREAKER_OPEN_SECONDS", 0.0)
    assert _ask(store, setup, run, 40, 2) == ["judged"] * 2  # tried again after its time


def test_the_judge_timeouts_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_JUDGE_TIMEOUT_SECONDS", "2.5")
    monkeypatch.setenv("ASSAY_JUDGE_DEADLINE_SECONDS", "7")
    judge = OpenAIJudge(MODEL, api_key="test")
    assert (judge.timeout, judge.deadline_seconds) == (2.5, 7.0)

    monkeypatch.setenv("ASSAY_JUDGE_DEADLINE_SECONDS", "soon")
    with pytest.raises(ValueError, match="ASSAY_JUDGE_DEADLINE_SECONDS must be a positive"):
        OpenAIJudge(MODEL, api_key="test")
