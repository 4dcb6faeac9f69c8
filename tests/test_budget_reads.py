"""Budgets read only when something is left to ask (issue #36 item 4): a judge setup reads the
FinOps budgets from the Prefect API at its first preflight, never for a batch the verdict cache
answers whole, and still fails closed when they cannot be read.

The Prefect API is a real HTTP server on localhost that counts the budget reads and answers them
as a test says (no budget type registered: 404; broken: 500); the judge is the real adapter
against the test judge server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import prefect
import pytest
from prefect.settings import PREFECT_API_URL, temporary_settings

from assay.finops.budget import Budget
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import cache_key
from assay.judge.port import JudgeRequest, Verdict
from assay.judge.service import Judged, JudgeSetup, judge_requests
from assay.judge.spending import budgets_once
from assay.store import FileStore
from blocks.judge_settings import judge_setup
from tests.judge_server import JudgeServer, verdict
from tests.local_http import JsonHandler, serving

BUDGETS_PATH = "/block_types/slug/assay-finops-budget/block_documents"


class BudgetApi:
    """A Prefect API that answers budget reads with `status` and counts them."""

    def __init__(self) -> None:
        self.status = 404
        self.reads = 0
        self.url = ""


@pytest.fixture
def budget_api() -> Iterator[BudgetApi]:
    api = BudgetApi()

    class Handler(JsonHandler):
        def answer(self, method: str, path: str) -> tuple[int, object]:
            if path.split("?")[0] == "/api/admin/version":
                return 200, prefect.__version__
            if path.split("?")[0] == "/api" + BUDGETS_PATH:
                api.reads += 1
            return api.status, {"detail": "no such block type"}

    with serving(Handler) as server:
        api.url = f"http://127.0.0.1:{server.server_address[1]}/api"
        with temporary_settings({PREFECT_API_URL: api.url}):
            yield api


def _judge(store: FileStore, setup: JudgeSetup, cases: int) -> Judged[Verdict]:
    hasher = OutputHasher(store_secret(store))
    asked = [
        (
            cache_key(hasher, "check", setup.pin, {"case": f"c{i}", "rubric": "r"}),
            JudgeRequest(case_id=f"c{i}", input="q", rubric="r", output=f"answer {i}"),
        )
        for i in range(cases)
    ]
    return judge_requests(
        store, setup, asked, run_id="run-reads", chunk=0, suite="refunds", subject="agent:bot@v1"
    )


def test_a_batch_the_cache_answers_whole_reads_no_budgets(
    judge_env: JudgeServer, budget_api: BudgetApi, tmp_path: Path
) -> None:
    judge_env.script(default=verdict("pass", 0.9))
    store = FileStore(tmp_path)

    first = _judge(store, judge_setup(None, False), cases=3)
    assert (first.calls, budget_api.reads) == (3, 1)  # asked: the preflight read them, once
    assert first.decision is not None and first.decision.status == "no_budget"

    again = _judge(store, judge_setup(None, False), cases=3)
    assert (again.cache_hits, again.calls, again.decision) == (3, 0, None)
    assert budget_api.reads == 1  # every check cached: nothing left to ask, nothing read

    more = _judge(store, judge_setup(None, False), cases=4)
    assert (more.cache_hits, more.calls, budget_api.reads) == (3, 1, 2)


def test_budgets_that_cannot_be_read_still_refuse_what_is_left_to_ask(
    judge_env: JudgeServer, budget_api: BudgetApi, tmp_path: Path
) -> None:
    judge_env.script(default=verdict("pass", 0.9))
    store = FileStore(tmp_path)
    assert _judge(store, judge_setup(None, False), cases=2).calls == 2
    budget_api.status = 500

    cached = _judge(store, judge_setup(None, False), cases=2)
    assert (cached.cache_hits, cached.decision, budget_api.reads) == (2, None, 1)

    refused = _judge(store, judge_setup(None, False), cases=3)
    assert refused.decision is not None and refused.decision.status == "refused"
    assert "unreadable" in refused.decision.reason
    assert refused.calls == 0 and len(judge_env.requests) == 2  # the new check never sent
    assert [v.status for v in refused.verdicts] == ["pass", "pass", "skipped"]
    assert budget_api.reads == 2


def test_budgets_once_reads_once_however_many_threads_ask() -> None:
    reads: list[float] = []

    def read() -> list[Budget] | None:
        reads.append(time.monotonic())
        time.sleep(0.05)  # long enough for every thread to be asking meanwhile
        return [Budget(name="team", limit_usd=5)]

    budgets = budgets_once(read)
    seen: list[list[Budget] | None] = []
    threads = [threading.Thread(target=lambda: seen.append(budgets())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(reads) == 1
    assert len(seen) == 8 and all(found is seen[0] for found in seen)
