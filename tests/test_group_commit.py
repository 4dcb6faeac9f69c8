"""Group commit of a judging's spend (`assay.judge.recording`): the calls that return while a
ledger record is being written are written as one record, and a verdict is still cached only
once its call's spend is on record, its slot held until then.

A real judge server (tests/judge_server.py) answers over HTTP through the real `openai` SDK; the
store is a real `FileStore` whose ledger writes are slowed (a slow disk or a far S3), which is
when groups form."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from assay.finops.ledger import CostRecord
from assay.finops.pricing import Prices
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import CACHE_PREFIX, cache_key
from assay.judge.openai_adapter import OpenAIJudge
from assay.judge.port import JudgeRequest
from assay.judge.prompts import load_prompt
from assay.judge.service import JudgeSetup, judge_requests
from assay.store import FileStore
from tests.judge_server import JudgeServer, Reply, slow, verdict

CALLS = 48
WINDOW = 8
LEDGER_WRITE_SECONDS = 0.03


class SlowLedgerStore(FileStore):
    """A file store whose ledger writes take 30 ms, and which checks every verdict-cache write:
    the calls on record in the ledger at that moment must cover it."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.lock = threading.Lock()
        self.calls_on_record = 0
        self.call_records = 0
        self.cached = 0
        self.cached_before_spend = 0

    def put_once(self, key: str, data: bytes) -> bool:
        if key.startswith("costs/"):
            time.sleep(LEDGER_WRITE_SECONDS)
            written = super().put_once(key, data)
            record = CostRecord.model_validate_json(data)
            with self.lock:
                if record.part:
                    self.call_records += 1
                    self.calls_on_record += record.calls
            return written
        if key.startswith(CACHE_PREFIX):
            with self.lock:
                self.cached += 1
                self.cached_before_spend += self.cached > self.calls_on_record
        return super().put_once(key, data)


def test_calls_returning_together_share_a_ledger_record_and_verdicts_wait_for_it(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.script(default=slow(0.02, Reply(content=verdict().content, usage=(50, 10))))
    store = SlowLedgerStore(tmp_path / "evidence")
    setup = JudgeSetup(
        make_judge=lambda: OpenAIJudge("judge-m", base_url=judge_server.base_url, api_key="t"),
        skip_reason="",
        model="judge-m",
        prompt_version=load_prompt().version,
        prices=Prices(input_per_million=1.0, output_per_million=2.0),
        max_concurrency=WINDOW,
    )
    hasher = OutputHasher(store_secret(store))
    requests = [
        (
            cache_key(hasher, "check", setup.pin, {"case": f"c{i}"}),
            JudgeRequest(case_id=f"c{i}", input="q", rubric="r", output=f"answer {i}"),
        )
        for i in range(CALLS)
    ]

    judged = judge_requests(
        store, setup, requests, run_id="run-g", chunk=0, suite="s", subject="a:b"
    )

    assert judged.calls == CALLS and len(judge_server.requests) == CALLS
    assert store.cached == CALLS and store.cached_before_spend == 0
    assert store.calls_on_record == CALLS
    # 48 calls returning 20 ms apart in waves of 8 against 30 ms ledger writes: groups form.
    assert store.call_records < CALLS / 2
    # The slot is held until the call is on record: never more than the window at the judge.
    assert judge_server.max_in_flight <= WINDOW
    summary = [
        CostRecord.model_validate_json(store.get(key))
        for key in store.list("costs/")
        if "-s" in key.rsplit("/", 1)[-1]
    ]
    assert [record.calls for record in summary] == [CALLS]
    assert len(summary[0].covers) == store.call_records
