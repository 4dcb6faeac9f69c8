"""Spend that stops (issue #38 item 6): a judge that bills more than its reservation, against a
$50 blocking budget, spends at most $50 plus one call's billed cost per run — in one run, in one
run of four chunks, and across four runs gated at once — and no run that crossed the budget
passes with its budget "allowed" (nor does a what-if gate of it).

The judge is the local OpenAI-compatible server playing a judge that ignores `max_tokens` and
bills 2,000,000 completion tokens a call ($20 at $10 per million; each call was reserved at the
400-token allowance, under a cent), asked through the real `openai` SDK by the real suite-run
and gate flows on the session's Prefect API; the runs share one folder store.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assay.finops.ledger import read_costs
from assay.gate.decision import BUDGET_BLOCKED, what_if
from assay.runs.records import EvalResult
from assay.store import FileStore
from blocks import FinOpsBudget
from tests.judge_server import JudgeServer, Reply, slow, verdict
from tests.launched import gate, suite_run

LIMIT_USD = 50.0
CALL_USD = 20.0
"""What the over-billing judge bills a call: 2,000,000 output tokens at $10 per million."""
CASES = 40
BUDGET = "test-spend-stops"
OVERBILLED = slow(
    0.2, Reply(content=verdict().content, usage=(50, 2_000_000), honours_max_tokens=False)
)
"""Ignores `max_tokens`: each call is billed $20, though reserved at 400 tokens ($0.004)."""


@pytest.fixture
def overbilling_judge(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[JudgeServer]:
    """The judge every run here uses (the default `auto` concurrency), and a $50 block budget
    over everything."""
    judge_server.script(default=OVERBILLED)
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-test-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "10.0")
    FinOpsBudget(limit_usd=LIMIT_USD, period="day", mode="block", scope="*").save(
        BUDGET, overwrite=True
    )
    try:
        yield judge_server
    finally:
        FinOpsBudget.delete(BUDGET)


def _suite(tmp_path: Path, name: str) -> tuple[str, str]:
    """A suite of `CASES` cases, each carrying one `llm_judge` check, and their outputs (its
    own: no verdict is cached for another suite's)."""
    rows = [
        {"id": f"c{i:02d}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Is polite."}}]}
        for i in range(CASES)
    ]
    suite = tmp_path / f"{name}.json"
    suite.write_text(json.dumps({"suite": name, "cases": rows}))
    outputs = tmp_path / f"{name}.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": r["id"], "output": f"yes, {name}"}) + "\n" for r in rows)
    )
    return str(suite), str(outputs)


def _spent(store: FileStore, run_id: str | None = None) -> float:
    today = datetime.now(UTC).date()
    records = read_costs(store, today - timedelta(days=1), today, run_id=run_id)
    return sum(record.cost_usd for record in records)


def _stopped_by_its_budget(result: EvalResult) -> None:
    """The run's budget state says blocked, and why; its gate fails on it."""
    assert result.budget is not None and result.budget.status == "blocked", result.budget
    assert result.budget.budget == BUDGET
    assert f"> limit ${LIMIT_USD:.4f}" in result.budget.reason


@pytest.mark.usefixtures("prefect_api")
def test_one_run_overshoots_by_at_most_one_call(
    overbilling_judge: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path, "one-run")

    result = suite_run(suite=suite, outputs=outputs, subject="agent:overbilled@v1")

    store = FileStore(store_dir)
    assert _spent(store) <= LIMIT_USD + CALL_USD  # was $380-420 (19-21 calls)
    assert len(overbilling_judge.requests) <= (LIMIT_USD + CALL_USD) / CALL_USD
    _stopped_by_its_budget(result)
    assert not result.passed


@pytest.mark.usefixtures("prefect_api")
def test_four_chunks_of_one_run_count_each_others_spend(
    overbilling_judge: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path, "four-chunks")

    result = suite_run(
        suite=suite, outputs=outputs, subject="agent:overbilled@v1", chunk_size=CASES // 4
    )

    store = FileStore(store_dir)
    assert _spent(store) <= LIMIT_USD + CALL_USD  # was $160, and the run passed
    _stopped_by_its_budget(result)
    assert not result.passed
    recorded = what_if(store, result.run_id, pass_threshold=0.0, min_coverage=0.0)
    assert recorded.verdict == "fail"
    assert BUDGET_BLOCKED in [reason.rule for reason in recorded.reasons]


@pytest.mark.usefixtures("prefect_api")
def test_four_concurrent_gates_overshoot_by_at_most_one_call_each(
    overbilling_judge: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    overbilling_judge.script(default=OVERBILLED, together=4)  # the runs' first calls at once
    gates: list[object] = [None] * 4
    start = threading.Barrier(len(gates))

    def gated(number: int) -> None:
        suite, outputs = _suite(tmp_path, f"gated-{number}")
        start.wait()
        gates[number] = gate(suite=suite, outputs=outputs, subject=f"agent:team{number}@v1")

    threads = [threading.Thread(target=gated, args=(n,)) for n in range(len(gates))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)

    store = FileStore(store_dir)
    assert overbilling_judge.max_in_flight > 1  # the runs judged at the same time
    assert _spent(store) <= LIMIT_USD + len(gates) * CALL_USD  # two of four passed at $80
    for run in gates:
        assert run is not None, "a gate did not finish"
        decision, result = run.decision, run.result  # type: ignore[attr-defined]
        assert _spent(store, result.run_id) <= LIMIT_USD + CALL_USD
        _stopped_by_its_budget(result)
        assert decision.verdict == "fail"
        assert BUDGET_BLOCKED in [reason.rule for reason in decision.reasons]
        replayed = what_if(store, result.run_id, pass_threshold=0.0, min_coverage=0.0)
        assert BUDGET_BLOCKED in [reason.rule for reason in replayed.reasons]
