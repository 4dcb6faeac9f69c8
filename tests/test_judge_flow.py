"""The example suite's llm_judge checks judged through the real openai SDK against a local
OpenAI-compatible server: verdicts, cache, costs, budget stop, missing credentials, canary."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assay.findings import list_findings
from assay.runs.records import EvalResult
from assay.store import FileStore
from blocks import FinOpsBudget
from tests.conftest import EXAMPLES
from tests.judge_server import JudgeServer, verdict
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

SUITE = str(EXAMPLES / "support-suite.yaml")
JUDGED_CHECKS = 8  # llm_judge checks in the example suite, all with outputs in v1
CANARY = "CANARY-judge-3c9e-never-stored"
BATCH = re.compile(r"-s[0-9a-f]{32}\.json$")
"""A judged batch's summary record in the cost ledger."""


@pytest.fixture
def judge_env(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-test-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    return judge_server


def _canary_outputs(tmp_path: Path) -> str:
    rows = [
        json.loads(line)
        for line in (EXAMPLES / "outputs" / "support-bot-v1.jsonl").read_text().splitlines()
    ]
    path = tmp_path / "v1-canary.jsonl"
    path.write_text(
        "".join(json.dumps({**r, "output": f"{r['output']} {CANARY}"}) + "\n" for r in rows)
    )
    return str(path)


def test_judged_cached_priced_and_nothing_stored(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=verdict("pass", 0.9, reasoning=f"reasoning {CANARY}-R"))
    outputs = _canary_outputs(tmp_path)

    first = suite_run(suite=SUITE, outputs=outputs, subject="agent:judge@v1")

    m = first.metrics
    assert (m.judge_calls, m.judge_cache_hits, m.skipped_checks) == (JUDGED_CHECKS, 0, 0)
    assert len(judge_env.requests) == JUDGED_CHECKS
    # 8 calls x (120 prompt + 30 completion tokens) at $1 / $2 per million
    assert m.judge_cost_usd == pytest.approx(8 * (120 * 1.0 + 30 * 2.0) / 1e6)
    store = FileStore(store_dir)
    # One summary per judged batch, standing for the records written as each call returned.
    (ledger_key,) = [k for k in store.list("costs/") if first.run_id in k and BATCH.search(k)]
    assert json.loads(store.get(ledger_key))["calls"] == JUDGED_CHECKS

    second = suite_run(suite=SUITE, outputs=outputs, subject="agent:judge@v1")
    assert (second.metrics.judge_calls, second.metrics.judge_cache_hits) == (0, JUDGED_CHECKS)
    assert len(judge_env.requests) == JUDGED_CHECKS  # the cache spent nothing
    assert second.pass_rate == first.pass_rate

    fresh = suite_run(suite=SUITE, outputs=outputs, subject="agent:judge@v1", fresh_judge=True)
    assert fresh.metrics.judge_calls == JUDGED_CHECKS

    for path in store_dir.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path  # neither output nor reasoning


def test_failing_verdicts_fail_cases_and_missing_credentials_skip(
    judge_env: JudgeServer, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outputs = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
    judge_env.script(default=verdict("fail", 0.1))
    failing = suite_run(suite=SUITE, outputs=outputs, subject="agent:judge@fail")
    assert failing.metrics.passed <= 45 - 1  # judged checks now count, and they failed

    monkeypatch.delenv("OPENAI_API_KEY")
    skipped = suite_run(suite=SUITE, outputs=outputs, subject="agent:judge@nokey")
    assert skipped.metrics.skipped_checks == JUDGED_CHECKS
    assert skipped.metrics.judge_calls == 0
    assert skipped.metrics.passed == 45  # skipped checks are excluded, never passed


def test_budget_stops_spending_before_it_starts(judge_env: JudgeServer, store_dir: Path) -> None:
    FinOpsBudget(
        limit_usd=0.000001, period="day", mode="block", scope="subject:agent:budget-test"
    ).save("test-tiny-budget", overwrite=True)
    try:
        result = suite_run(
            suite=SUITE,
            outputs=str(EXAMPLES / "outputs" / "support-bot-v1.jsonl"),
            subject="agent:budget-test@v1",
        )
    finally:
        FinOpsBudget.delete("test-tiny-budget")  # type: ignore[attr-defined]

    assert judge_env.requests == []
    assert result.metrics.judge_calls == 0
    assert result.metrics.skipped_checks == JUDGED_CHECKS
    assert result.budget is not None and result.budget.status == "blocked"
    kinds = [f.kind for f in list_findings(FileStore(store_dir), result.run_id)]
    assert kinds == ["budget_blocked"]


def test_changing_the_judge_model_is_reported_and_misses_the_cache(
    judge_env: JudgeServer, store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic import SecretStr

    from blocks import JudgeSettings

    outputs = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
    first = suite_run(suite=SUITE, outputs=outputs, subject="agent:pin@v1")
    assert first.judge is not None and first.judge.model == "judge-test-1"
    assert first.judge.prompt_version.startswith("default@")

    JudgeSettings(
        model="judge-test-2",
        base_url=judge_env.base_url,
        api_key=SecretStr("sk-block"),
        max_concurrency=2,
    ).save("test-judge-settings", overwrite=True)
    monkeypatch.delenv("OPENAI_API_KEY")  # the block's key must be the one used
    second = suite_run(
        suite=SUITE, outputs=outputs, subject="agent:pin@v1", judge_block="test-judge-settings"
    )

    assert second.metrics.judge_calls == JUDGED_CHECKS  # a new model pin: no cached verdicts
    assert second.regression is not None
    assert "judge_model: judge-test-1 → judge-test-2" in second.regression.changed
    assert judge_env.requests[-1].body["model"] == "judge-test-2"


@pytest.fixture
def judge_block_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every HTTP request that reads the `test-judge-once` block from the Prefect API (httpx's
    own send, counted; the request still goes out)."""
    import httpx

    reads: list[str] = []
    marker = "/block_types/slug/assay-judge-settings/block_documents/name/test-judge-once"

    def counting(send):  # type: ignore[no-untyped-def]
        def counted(self, request, *args, **kwargs):  # type: ignore[no-untyped-def]
            if marker in request.url.path:
                reads.append(request.url.path)
            return send(self, request, *args, **kwargs)

        return counted

    monkeypatch.setattr(httpx.Client, "send", counting(httpx.Client.send))
    monkeypatch.setattr(httpx.AsyncClient, "send", counting(httpx.AsyncClient.send))
    return reads


def test_a_judge_block_is_read_once_per_run_and_again_when_edited(
    judge_env: JudgeServer, store_dir: Path, judge_block_reads: list[str]
) -> None:
    from pydantic import SecretStr

    from blocks import JudgeSettings

    def save(model: str) -> None:
        JudgeSettings(model=model, base_url=judge_env.base_url, api_key=SecretStr("sk-b")).save(
            "test-judge-once", overwrite=True
        )

    def run() -> EvalResult:
        judge_block_reads.clear()  # saving over a block reads it too: count the run's own
        return suite_run(
            suite=SUITE,
            outputs=str(EXAMPLES / "outputs" / "support-bot-v1.jsonl"),
            subject="agent:once@v1",
            judge_block="test-judge-once",
            chunk_size=10,
        )

    save("judge-once-1")
    first = run()
    assert first.metrics.cases // 10 >= 4  # several chunks, each judging with the block
    assert first.judge is not None and first.judge.model == "judge-once-1"
    assert len(judge_block_reads) == 1

    save("judge-once-2")  # an edited block: the next run reads it and judges with it
    second = run()
    assert second.judge is not None and second.judge.model == "judge-once-2"
    assert second.metrics.judge_calls == JUDGED_CHECKS  # a new pin: nothing from the cache
    assert len(judge_block_reads) == 1
