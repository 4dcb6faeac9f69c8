"""The cost plan (`--plan`, `plan=true`): exact in judge calls against the runs that follow it
(cold cache, then warm), an upper bound of what the ledger records, each budget's headroom, and
nothing called or written while planning. Judged through the real openai SDK against the local
judge server."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.client import AssayClient
from assay.finops.pricing import BATCH_DISCOUNT, Prices
from assay.runs.cost_plan import CostPlan, plan_run
from assay.runs.options import RunOptions
from assay.store import FileStore
from blocks import FinOpsBudget
from blocks.judge_settings import judge_setup
from tests.api_service import Service, example_outputs, example_suite, start_service
from tests.conftest import EXAMPLES
from tests.judge_server import JudgeServer, verdict
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

SUITE = str(EXAMPLES / "support-suite.yaml")
OUTPUTS = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
JUDGED_CHECKS = 8  # llm_judge checks in the example suite, all with outputs in v1


@pytest.fixture
def priced_judge(judge_env: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    judge_env.script(default=verdict("pass", 0.9))
    return judge_env


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _plan(store_dir: Path, **options: object) -> CostPlan:
    run = RunOptions(suite=SUITE, outputs=OUTPUTS, subject="agent:plan@v1", **options)
    setup = judge_setup(run.judge_block, run.fresh_judge, run.judge_repeats)
    return plan_run(FileStore(store_dir), run, setup)


BATCH = re.compile(r"-s[0-9a-f]{32}\.json$")
"""A judged batch's summary record in the cost ledger (it stands for the batch's calls)."""


def _ledger_cost(store_dir: Path, run_id: str) -> float:
    store = FileStore(store_dir)
    summaries = [k for k in store.list("costs/") if run_id in k and BATCH.search(k)]
    assert summaries
    return float(sum(json.loads(store.get(key))["cost_usd"] for key in summaries))


def test_plan_is_exact_in_calls_cold_then_warm_and_bounds_the_cost(
    priced_judge: JudgeServer, store_dir: Path
) -> None:
    before = _files(store_dir)
    cold = _plan(store_dir, judge_repeats=3, chunk_size=7)
    assert _files(store_dir) == before  # nothing written: no suite, no secret, no reservation
    assert priced_judge.requests == []  # no judge called
    assert (cold.checks, cold.repeats, cold.jurors) == (JUDGED_CHECKS, 3, 1)
    assert (cold.calls, cold.cache_hits) == (3 * JUDGED_CHECKS, 0)

    first = suite_run(
        suite=SUITE, outputs=OUTPUTS, subject="agent:plan@v1", judge_repeats=3, chunk_size=7
    )
    assert first.metrics.judge_calls == cold.calls == len(priced_judge.requests)
    assert 0 < first.metrics.judge_cost_usd <= cold.cost_usd.sync
    assert _ledger_cost(store_dir, first.run_id) <= cold.cost_usd.sync
    assert cold.cost_usd.batch == pytest.approx(cold.cost_usd.sync * (1 - BATCH_DISCOUNT))

    warm = _plan(store_dir, judge_repeats=3, chunk_size=7)
    assert (warm.calls, warm.cache_hits, warm.cost_usd.sync) == (0, 3 * JUDGED_CHECKS, 0.0)
    second = suite_run(
        suite=SUITE, outputs=OUTPUTS, subject="agent:plan@v1", judge_repeats=3, chunk_size=7
    )
    assert second.metrics.judge_calls == warm.calls == 0

    # Five repeats reuse the three paid for: two more per check, as the run then asks.
    more = _plan(store_dir, judge_repeats=5)
    assert (more.calls, more.cache_hits) == (2 * JUDGED_CHECKS, 3 * JUDGED_CHECKS)
    third = suite_run(suite=SUITE, outputs=OUTPUTS, subject="agent:plan@v1", judge_repeats=5)
    assert third.metrics.judge_calls == more.calls
    fresh = _plan(store_dir, fresh_judge=True)
    assert (fresh.calls, fresh.cache_hits) == (JUDGED_CHECKS, 0)


def test_budget_headroom_and_a_blocked_plan(priced_judge: JudgeServer, store_dir: Path) -> None:
    scope = "subject:agent:plan"
    FinOpsBudget(limit_usd=0.000001, period="day", mode="block", scope=scope).save(
        "test-plan-tiny", overwrite=True
    )
    FinOpsBudget(limit_usd=100, period="day", mode="alert", scope=scope).save(
        "test-plan-roomy", overwrite=True
    )
    try:
        plan = _plan(store_dir)
        run = suite_run(suite=SUITE, outputs=OUTPUTS, subject="agent:plan@v1")
    finally:
        for name in ("test-plan-tiny", "test-plan-roomy"):
            FinOpsBudget.delete(name)
    assert plan.blocked and plan.reason is not None and "test-plan-tiny" in plan.reason
    by_name = {budget.name: budget for budget in plan.budgets}
    assert by_name["test-plan-tiny"].blocked and by_name["test-plan-tiny"].headroom == 0.000001
    assert not by_name["test-plan-roomy"].blocked
    assert by_name["test-plan-roomy"].headroom == 100
    assert run.budget is not None and run.budget.status == "blocked"  # as planned
    assert run.metrics.judge_calls == 0 and priced_judge.requests == []


def test_without_a_judge_nothing_is_asked(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ASSAY_JUDGE_MODEL", raising=False)
    plan = _plan(store_dir)
    assert (plan.checks, plan.calls, plan.judge, plan.blocked) == (JUDGED_CHECKS, 0, None, False)
    assert plan.not_judged


def test_batch_prices_take_the_batch_discount() -> None:
    assert Prices(input_per_million=2, output_per_million=8).batch() == Prices(
        input_per_million=1, output_per_million=4, batch_discount=0
    )


def test_cli_plan_json_and_table(priced_judge: JudgeServer, store_dir: Path) -> None:
    planned = [SUITE, "--outputs", OUTPUTS, "--plan", "--local", "--judge-repeats", "2"]
    for command in ("run", "gate"):
        result = CliRunner().invoke(app, [command, *planned, "--json"])
        assert result.exit_code == 0, result.output
        answer = json.loads(result.output)
        assert answer["calls"] == 2 * JUDGED_CHECKS and answer["blocked"] is False
        assert set(answer["cost_usd"]) == {"sync", "batch"}
    table = CliRunner().invoke(app, ["run", *planned])
    assert table.exit_code == 0 and "judge calls 16" in table.output, table.output
    assert priced_judge.requests == []
    assert not list(store_dir.rglob("runs/*"))  # no run recorded


@pytest.fixture
def planning_service(
    tmp_path: Path, prefect_api: str, judge_server: JudgeServer
) -> Iterator[Service]:
    judge = {
        "ASSAY_JUDGE_MODEL": "judge-test-1",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": judge_server.base_url,
        "NO_PROXY": "127.0.0.1,localhost",
    }
    service = start_service(tmp_path / "serve", env=judge, prefect_api_url=prefect_api)
    with service.client("operator") as client:
        assert client.post("/suites", json=example_suite()).status_code == 201
    try:
        yield service
    finally:
        service.stop()


def test_service_answers_the_plan_and_starts_nothing(
    planning_service: Service, judge_server: JudgeServer
) -> None:
    judge_server.script(default=verdict("pass", 0.9))
    body = {"suite": "support-bot", "subject": "agent:plan@v1", "outputs": example_outputs("v1")}
    with planning_service.client("operator") as http:
        answered = http.post("/runs", params={"plan": "true"}, json=body)
        assert answered.status_code == 200, answered.text
        gated = http.post("/gate", params={"plan": "true"}, json=body)
        assert gated.status_code == 200 and gated.json()["calls"] == JUDGED_CHECKS
        assert http.get("/runs").json()["items"] == []  # no flow started
    assert answered.json()["calls"] == JUDGED_CHECKS and judge_server.requests == []
    client = AssayClient(planning_service.url, planning_service.tokens["operator"])
    planned = client.plan("support-bot", subject="agent:plan@v1", outputs=example_outputs("v1"))
    assert planned.model_dump(mode="json") == answered.json()
    ran = client.run("support-bot", subject="agent:plan@v1", outputs=example_outputs("v1"))
    assert ran.metrics.judge_calls == planned.calls  # type: ignore[union-attr]
    warm = client.plan("support-bot", subject="agent:plan@v1", outputs=example_outputs("v1"))
    assert (warm.calls, warm.cache_hits) == (0, JUDGED_CHECKS)
