"""Spend that cannot be beaten or lost (issue #13 items 2, 3, 5; issue #16 item 4).

- concurrent batches (two runs, N chunks) reserve their projected spend before the preflight
  reads the ledger, so together they never pass a `block` budget;
- every call is capped at the output tokens the projection priced, so a long-winded judge
  cannot spend past it;
- spend is recorded as calls return, so a kill -9 and a resume (with any chunk layout) leave
  the ledger holding every paid call but those in flight at the kill;
- a store that cannot take the spend stops the judging at once.

The judge is the real adapter (the `openai` SDK) against the test server on localhost; stores
are a real folder and a real moto S3 server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assay.errors import StoreUnavailableError
from assay.findings import list_findings
from assay.finops.budget import Budget, preflight
from assay.finops.ledger import CostRecord, read_costs
from assay.finops.pricing import Prices
from assay.finops.reservations import TTL_ENV, live_reservations, reserve
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import cache_key
from assay.judge.openai_adapter import OpenAIJudge
from assay.judge.port import JudgeRequest
from assay.judge.prompts import load_prompt
from assay.judge.service import JudgeSetup, judge_requests
from assay.runs.render import warnings
from assay.store import EvidenceStore, FileStore
from blocks import FinOpsBudget
from tests.judge_server import JudgeServer, Reply, slow, verdict
from tests.launched import suite_run
from tests.servers import RestartableS3Server, S3Server

MODEL = "judge-test-model"
CENT_PER_TOKEN = Prices(input_per_million=0, output_per_million=10_000)
"""$0.01 per output token, nothing per input token: a call's cost is its completion tokens."""
ALLOWANCE = 400
"""Output tokens priced per call (and sent as max_tokens): a call projects $4.00."""


def setup_for(server: JudgeServer, budgets: list[Budget], **options: object) -> JudgeSetup:
    def make_judge() -> OpenAIJudge:
        return OpenAIJudge(
            MODEL,
            base_url=server.base_url,
            api_key="test",
            timeout=10.0,
            max_attempts=2,
            backoff_seconds=0.01,
            max_backoff_seconds=0.02,
        )

    values: dict[str, object] = {
        "make_judge": make_judge,
        "skip_reason": "",
        "model": MODEL,
        "prompt_version": load_prompt().version,
        "prices": CENT_PER_TOKEN,
        "budgets": budgets,
        "max_output_tokens": ALLOWANCE,
        "max_concurrency": 4,
    }
    values.update(options)
    return JudgeSetup(**values)  # type: ignore[arg-type]


def batch(
    store: EvidenceStore, setup: JudgeSetup, tag: str, n: int
) -> list[tuple[str, JudgeRequest]]:
    hasher = OutputHasher(store_secret(store))
    out = []
    for i in range(n):
        request = JudgeRequest(case_id=f"{tag}-{i}", input="q", rubric="r", output=f"{tag} {i}")
        key = cache_key(hasher, "check", setup.pin, {"case": f"{tag}-{i}", "rubric": "r"})
        out.append((key, request))
    return out


def ledger(store: EvidenceStore) -> list[CostRecord]:
    """The ledger as every reader sees it (batch summaries stand for their calls' records)."""
    today = datetime.now(UTC).date()
    return read_costs(store, today - timedelta(days=1), today)


def spent_usd(store: EvidenceStore) -> float:
    return sum(record.cost_usd for record in ledger(store))


def run_concurrently(jobs: list[Callable[[], object]]) -> list[object]:
    results: list[object] = [None] * len(jobs)
    start = threading.Barrier(len(jobs))

    def work(i: int) -> None:
        start.wait()
        results[i] = jobs[i]()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


@pytest.fixture(params=["file", "s3"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> EvidenceStore:
    """The store concurrent batches share: a folder, or a bucket on a real moto server."""
    if request.param == "file":
        return FileStore(tmp_path / "evidence")
    moto: S3Server = request.getfixturevalue("moto_s3")
    return moto.store()


def test_concurrent_runs_cannot_beat_a_block_budget(
    judge_server: JudgeServer, shared_store: EvidenceStore
) -> None:
    # Each run: 10 calls projected at $4.00 = $40, each really costing $3.00 (300 tokens).
    # Either fits under $50 alone; both together would spend $60.
    judge_server.script(default=slow(0.05, Reply(content=verdict().content, usage=(50, 300))))
    budget = Budget(name="team", limit_usd=50, period="day")
    setup = setup_for(judge_server, [budget])
    jobs = [
        lambda tag=tag: judge_requests(
            shared_store,
            setup,
            batch(shared_store, setup, tag, 10),
            run_id=f"run-{tag}",
            chunk=0,
            suite="refunds",
            subject="agent:bot@v1",
        )
        for tag in ("a", "b")
    ]

    results = run_concurrently(jobs)

    decisions = sorted(r.decision.status for r in results)  # type: ignore[attr-defined]
    assert decisions == ["allowed", "blocked"]
    assert spent_usd(shared_store) == pytest.approx(30.0)
    assert spent_usd(shared_store) <= budget.limit_usd
    assert live_reservations(shared_store) == []  # released once the spend was recorded


def test_n_concurrent_chunks_never_overspend_a_block_budget(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    judge_server.script(default=slow(0.05, Reply(content=verdict().content, usage=(50, 300))))
    budget = Budget(name="team", limit_usd=100, period="day")  # six chunks would spend $180
    setup = setup_for(judge_server, [budget])
    jobs = [
        lambda n=n: judge_requests(
            store,
            setup,
            batch(store, setup, f"c{n}", 10),
            run_id="one-run",
            chunk=n,
            suite="refunds",
            subject="agent:bot@v1",
        )
        for n in range(6)
    ]

    results = run_concurrently(jobs)

    allowed = [r for r in results if r.decision.allowed]  # type: ignore[attr-defined]
    assert 1 <= len(allowed) < 6  # chunks that start after others recorded may still fit
    assert spent_usd(store) <= budget.limit_usd
    calls = sum(r.calls for r in results)  # type: ignore[attr-defined]
    # Every call made is recorded at its $3; an allowed chunk made all its 10. A chunk whose
    # preflight passed may still stop part-way once the period's recorded spend plus the
    # reservations it counted pass the limit (docs/spend-guard.md, "Spend that stops").
    assert calls == len(judge_server.requests) >= 10 * len(allowed)
    assert spent_usd(store) == pytest.approx(3.0 * calls)


def test_a_long_winded_judge_cannot_spend_past_the_projection(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    # The judge would answer at length: 100,000 completion tokens ($1,000) per call.
    judge_server.script(default=Reply(content=verdict().content * 2000, usage=(50, 100_000)))
    budget = Budget(name="tight", limit_usd=10, period="day")
    setup = setup_for(judge_server, [budget])

    judged = judge_requests(
        store,
        setup,
        batch(store, setup, "x", 2),
        run_id="r",
        chunk=0,
        suite="refunds",
        subject="agent:bot@v1",
    )

    assert judged.decision is not None and judged.decision.allowed  # projected $8.00 ≤ $10
    assert all(r.body.get("max_tokens") == ALLOWANCE for r in judge_server.requests)
    assert len(judge_server.requests) == 2  # a reply cut at max_tokens is not asked again
    assert [v.status for v in judged.verdicts] == ["skipped", "skipped"]
    assert spent_usd(store) == pytest.approx(judged.decision.projected_usd)
    assert spent_usd(store) <= budget.limit_usd


def test_a_crashed_workers_reservation_expires(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileStore(tmp_path / "evidence")
    monkeypatch.setenv(TTL_ENV, "600")
    budget = Budget(name="team", limit_usd=50, period="day")
    now = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    reserve(
        store,
        run_id="crashed",
        chunk=0,
        suite="refunds",
        subject="agent:bot@v1",
        amount_usd=40,
        now=now,
    )

    held = preflight(store, [budget], 20, "refunds", "agent:bot@v1", now + timedelta(minutes=9))
    expired = preflight(store, [budget], 20, "refunds", "agent:bot@v1", now + timedelta(minutes=11))

    assert (held.status, held.reserved_usd) == ("blocked", 40)
    assert "reserved $40.0000" in held.reason
    assert (expired.status, expired.reserved_usd) == ("allowed", None)


KILLED_RUN = """
import sys
from assay.finops.pricing import Prices
from assay.hashing import OutputHasher, store_secret
from assay.judge.openai_adapter import OpenAIJudge
from assay.judge.port import JudgeRequest
from assay.judge.prompts import load_prompt
from assay.judge.cache import cache_key
from assay.judge.service import JudgeSetup, judge_requests
from assay.store import FileStore

root, base_url, chunk, first, last = sys.argv[1:6]
store = FileStore(root)
pin_prompt = load_prompt().version
setup = JudgeSetup(
    # One attempt per call, a generous timeout: every request the server counts is one call.
    make_judge=lambda: OpenAIJudge(
        "judge-test-model", base_url=base_url, api_key="test", max_attempts=1, timeout=120.0
    ),
    skip_reason="", model="judge-test-model", prompt_version=pin_prompt,
    prices=Prices(input_per_million=0, output_per_million=10_000), max_concurrency=4,
)
hasher = OutputHasher(store_secret(store))
requests = []
for i in range(int(first), int(last)):
    request = JudgeRequest(case_id=f"c{i}", input="q", rubric="r", output=f"answer {i}")
    requests.append((cache_key(hasher, "check", setup.pin, {"case": f"c{i}"}), request))
judge_requests(store, setup, requests, run_id="run-1", chunk=int(chunk), suite="s",
               subject="agent:bot")
"""


def test_kill_and_resume_with_another_chunk_layout_records_every_paid_call(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    root = tmp_path / "evidence"
    judge_server.script(default=slow(0.02, Reply(content=verdict().content, usage=(50, 10))))
    script = tmp_path / "judge_run.py"
    script.write_text(KILLED_RUN)
    env = {**os.environ, "PYTHONPATH": str(Path.cwd())}

    def start(chunk: int, first: int, last: int) -> subprocess.Popen[bytes]:
        command = [sys.executable, str(script), str(root), judge_server.base_url]
        return subprocess.Popen([*command, str(chunk), str(first), str(last)], env=env)

    first = start(0, 0, 200)  # one chunk of 200
    deadline = time.monotonic() + 60
    while len(judge_server.requests) < 80 and time.monotonic() < deadline:
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait()
    paid_before_kill = len(judge_server.requests)
    for chunk, (low, high) in enumerate([(0, 100), (100, 200)]):  # resumed as two chunks
        assert start(chunk, low, high).wait(timeout=120) == 0
    paid = len(judge_server.requests)

    store = FileStore(root)
    recorded = sum(record.calls for record in ledger(store))
    assert 80 <= paid_before_kill < 200
    assert paid - 4 <= recorded <= paid  # all but the calls in flight at the kill
    assert spent_usd(store) == pytest.approx(recorded * 0.10)


def test_a_store_outage_stops_the_judging(
    judge_server: JudgeServer,
    restartable_moto: RestartableS3Server,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASSAY_S3_DEADLINE_SECONDS", "2")
    store = restartable_moto.store()
    setup = setup_for(judge_server, [], max_concurrency=2)
    requests = batch(store, setup, "o", 400)
    judge_server.script(default=slow(0.02, Reply(content=verdict().content, usage=(50, 10))))

    def outage() -> None:
        while len(judge_server.requests) < 20:
            time.sleep(0.005)
        restartable_moto.stop()

    stopper = threading.Thread(target=outage)
    stopper.start()
    with pytest.raises(StoreUnavailableError):
        judge_requests(store, setup, requests, run_id="r", chunk=0, suite="s", subject="agent:bot")
    stopper.join()

    assert len(judge_server.requests) < 200  # stopped soon after the store went away


def _judged_suite(tmp_path: Path, cases: int) -> tuple[str, str]:
    """A suite of `cases` cases, each carrying one `llm_judge` check, and their outputs."""
    rows = [
        {"id": f"c{i:02d}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Is polite."}}]}
        for i in range(cases)
    ]
    suite = tmp_path / "judged.json"
    suite.write_text(json.dumps({"suite": "judged", "cases": rows}))
    outputs = tmp_path / "judged.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": r["id"], "output": "yes"}) + "\n" for r in rows)
    )
    return str(suite), str(outputs)


@pytest.mark.usefixtures("prefect_api")
def test_a_judge_billing_past_max_tokens_cannot_spend_past_a_block_budget(
    judge_server: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each call is projected at 400 output tokens (a fraction of a cent), but the judge ignores
    # max_tokens and bills 2,000,000 completion tokens: $4.00 a call, $160 for the 40 cases.
    judge_server.script(
        default=Reply(content=verdict().content, usage=(50, 2_000_000), honours_max_tokens=False)
    )
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-test-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    suite, outputs = _judged_suite(tmp_path, 40)
    FinOpsBudget(limit_usd=50, period="day", mode="block", scope="subject:agent:overbilled").save(
        "test-overbilled-budget", overwrite=True
    )
    try:
        result = suite_run(suite=suite, outputs=outputs, subject="agent:overbilled@v1")
    finally:
        FinOpsBudget.delete("test-overbilled-budget")  # type: ignore[attr-defined]

    store = FileStore(store_dir)
    assert spent_usd(store) <= 2 * 50
    assert len(judge_server.requests) < 40
    assert not result.passed
    assert result.budget is not None and result.budget.status == "blocked"
    assert result.budget.reason.endswith("> limit $50.0000: no further judge call started")
    assert result.metrics.skipped_checks == 40 - len(judge_server.requests)
    assert [f.kind for f in list_findings(store, result.run_id)] == ["budget_blocked"]
    over = [note for note in warnings(result) if "max_tokens" in note]
    assert over == [
        f"{len(judge_server.requests)} judge call(s) reported more output tokens than max_tokens "
        "allows; recorded as reported"
    ]
