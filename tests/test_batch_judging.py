"""Batch judging (`judge.mode: batch`) against a fake of the Batch API (`tests/batch_server.py`),
driven by the real `openai` SDK: same verdicts as a synchronous run, at the batch rate, durable
across a kill, and only what failed sent again."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from assay.errors import InputError
from assay.finops.ledger import read_costs
from assay.finops.pricing import Prices
from assay.hashing import OutputHasher, store_secret
from assay.judge.batch import BATCH_PREFIX, UNANSWERED, Batching, Submission
from assay.judge.cache import cache_key
from assay.judge.openai_adapter import OpenAIJudge
from assay.judge.port import JudgePin, JudgeRequest, PairRequest, PairVerdict, Verdict
from assay.judge.prompts import load_prompt
from assay.judge.service import Judged, JudgeSetup, judge_pair_requests, judge_requests
from assay.judge.spending import Spender
from assay.store import FileStore
from blocks.judge_settings import JudgeSettings
from tests.batch_server import BatchServer

# The fake Batch API's fixtures (tests/conftest.py does not import them for every module).
from tests.batch_server import batch_server as batch_server
from tests.batch_server import batch_server_session as batch_server_session
from tests.judge_server import JudgeServer, RecordedRequest, Reply, prefers, verdict

MODEL = "judge-batch-1"
PRICES = Prices(input_per_million=2.0, output_per_million=8.0)
POLL_SECONDS = 0.05
ROOT = Path(__file__).resolve().parent.parent
_CASE = re.compile(r"case-(\d{4})")


def case_number(recorded: RecordedRequest) -> int:
    match = _CASE.search(recorded.text("user"))
    assert match is not None
    return int(match.group(1))


def consistent(recorded: RecordedRequest) -> Reply:
    """A judge that passes good answers and fails the rest, whichever way it is asked."""
    if "GOOD" in recorded.text("user"):
        return verdict("pass", 0.9)
    return verdict("fail", 0.2)


def make_setup(base_url: str, batching: Batching | None) -> JudgeSetup:
    return JudgeSetup(
        make_judge=lambda: OpenAIJudge(MODEL, base_url=base_url, api_key="test"),
        skip_reason="",
        model=MODEL,
        prompt_version=load_prompt().version,
        max_concurrency=16,
        prices=PRICES,
        batching=batching,
    )


def batching(server: BatchServer, **options: float) -> Batching:
    return Batching(server.base_url, "test", poll_seconds=POLL_SECONDS, **options)  # type: ignore[arg-type]


def questions(store: FileStore, n: int) -> list[tuple[str, JudgeRequest]]:
    hasher = OutputHasher(store_secret(store))
    pin = JudgePin(model=MODEL, prompt_version=load_prompt().version)
    asked = []
    for i in range(n):
        answer = "a GOOD answer" if i % 3 else "a poor answer"
        request = JudgeRequest(
            case_id=f"c{i}", input=f"case-{i:04d}: what is it?", rubric="correct", output=answer
        )
        content = {"case": f"case-{i}", "output": hasher(answer), "rubric": "correct"}
        asked.append((cache_key(hasher, "check", pin, content), request))
    return asked


def judge(store: FileStore, setup: JudgeSetup, n: int, run_id: str = "run-1") -> Judged[Verdict]:
    return judge_requests(
        store, setup, questions(store, n), run_id=run_id, chunk=0, suite="s", subject="agent:x"
    )


def ledger_usd(store: FileStore, run_id: str) -> float:
    today = datetime.now(UTC).date()
    return sum(record.cost_usd for record in read_costs(store, today, today, run_id=run_id))


def test_a_500_case_batch_gives_the_synchronous_verdicts_at_half_the_price(
    judge_server: JudgeServer, batch_server: BatchServer, tmp_path: Path
) -> None:
    judge_server.script(default=consistent)
    batch_server.policy = consistent
    sync_store, batch_store = FileStore(tmp_path / "sync"), FileStore(tmp_path / "batch")

    in_sync = judge(sync_store, make_setup(judge_server.base_url, None), 500)
    in_batch = judge(batch_store, make_setup(judge_server.base_url, batching(batch_server)), 500)

    assert in_batch.verdicts == in_sync.verdicts
    assert {v.status for v in in_batch.verdicts} == {"pass", "fail"}
    assert (in_batch.calls, in_sync.calls) == (500, 500)
    assert len(batch_server.batches) == 1 and batch_server.lines_submitted == 500
    assert in_batch.cost_usd == pytest.approx(in_sync.cost_usd / 2)
    assert ledger_usd(batch_store, "run-1") == pytest.approx(ledger_usd(sync_store, "run-1") / 2)
    assert ledger_usd(batch_store, "run-1") == pytest.approx(500 * (120 * 1.0 + 30 * 4.0) / 1e6)
    bodies = batch_server.batches[0].bodies()
    assert {body["max_tokens"] for body in bodies} == {400}  # capped as the preflight priced
    assert {body["response_format"]["type"] for body in bodies} == {"json_schema"}
    batch = batch_server.batches[0]
    assert {batch.input_file_id, batch.output_file_id} <= batch_server.deleted
    again = judge(batch_store, make_setup(judge_server.base_url, batching(batch_server)), 500)
    assert (again.calls, again.cache_hits, len(batch_server.batches)) == (0, 500, 1)


def test_a_batch_with_10_percent_failed_requests_resends_exactly_those(
    batch_server: BatchServer, tmp_path: Path
) -> None:
    batch_server.policy = consistent
    batch_server.fail = lambda number, recorded: number == 1 and case_number(recorded) % 10 == 0
    store = FileStore(tmp_path / "evidence")

    judged = judge(store, make_setup("http://127.0.0.1:9/v1", batching(batch_server)), 200)

    first, second = batch_server.batches
    assert first.failed == 20
    resent = sorted(int(_CASE.findall(b["messages"][1]["content"])[0]) for b in second.bodies())
    assert resent == list(range(0, 200, 10))
    assert batch_server.lines_submitted == 220
    assert all(v.reason == "judged" for v in judged.verdicts) and judged.calls == 200
    submission = Submission.model_validate_json(store.get(f"{BATCH_PREFIX}run-1/{second.id}.json"))
    assert submission.round == 2 and len(submission.requests) == 20


def test_an_expired_batch_resends_only_its_unfinished_requests(
    batch_server: BatchServer, tmp_path: Path
) -> None:
    batch_server.policy = consistent
    batch_server.expire_after = 120
    store = FileStore(tmp_path / "evidence")

    judged = judge(store, make_setup("http://127.0.0.1:9/v1", batching(batch_server)), 200)

    first, second = batch_server.batches
    assert (first.status, first.completed) == ("expired", 120)
    assert [int(_CASE.findall(b["messages"][1]["content"])[0]) for b in second.bodies()] == list(
        range(120, 200)
    )
    assert all(v.reason == "judged" for v in judged.verdicts) and judged.calls == 200


def test_a_batch_failed_as_a_whole_is_sent_again_and_never_past_the_rounds(
    batch_server: BatchServer, tmp_path: Path
) -> None:
    batch_server.fail_batch = True
    store = FileStore(tmp_path / "evidence")
    setup = make_setup("http://127.0.0.1:9/v1", batching(batch_server))

    judged = judge(store, setup, 10)
    assert [b.status for b in batch_server.batches] == ["failed", "completed"]
    assert all(v.status == "pass" for v in judged.verdicts)

    batch_server.fail = lambda _number, _recorded: True  # every request fails, every round
    failing = judge(FileStore(tmp_path / "other"), setup, 10)
    assert len(batch_server.batches) == 2 + 3
    assert {v.reason for v in failing.verdicts} == {UNANSWERED}
    assert {v.status for v in failing.verdicts} == {"skipped"}

    late = make_setup("http://127.0.0.1:9/v1", batching(batch_server, deadline_seconds=0))
    judge(FileStore(tmp_path / "late"), late, 10)
    assert len(batch_server.batches) == 5 + 1  # past the deadline: not sent again


def test_a_cancelled_batch_keeps_nothing_back(batch_server: BatchServer, tmp_path: Path) -> None:
    batch_server.hold()
    store = FileStore(tmp_path / "evidence")
    result: list[Judged[Verdict]] = []
    setup = make_setup("http://127.0.0.1:9/v1", batching(batch_server))
    worker = threading.Thread(target=lambda: result.append(judge(store, setup, 30)))
    worker.start()
    _until(lambda: bool(batch_server.batches))
    from openai import OpenAI

    with OpenAI(api_key="test", base_url=batch_server.base_url) as client:
        assert client.batches.cancel(batch_server.batches[0].id).status == "cancelled"
    batch_server.release()
    worker.join(timeout=30)

    assert [b.status for b in batch_server.batches] == ["cancelled", "completed"]
    assert len(batch_server.batches[1].lines) == 30
    assert all(v.status == "pass" for v in result[0].verdicts)


def run_until_killed(store_root: str, base_url: str) -> None:
    """The launching process of `test_a_run_killed_while_waiting_resumes_the_same_batch`."""
    store = FileStore(Path(store_root))
    batching_ = Batching(base_url, "test", poll_seconds=POLL_SECONDS)
    judge(store, make_setup("http://127.0.0.1:9/v1", batching_), 300)


def test_a_run_killed_while_waiting_resumes_the_same_batch(
    batch_server: BatchServer, tmp_path: Path
) -> None:
    batch_server.policy = consistent
    batch_server.hold()
    root = tmp_path / "evidence"
    code = f"from tests.test_batch_judging import run_until_killed; run_until_killed({str(root)!r}, {batch_server.base_url!r})"  # noqa: E501
    launched = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=dict(os.environ))
    try:
        store = FileStore(root)
        _until(lambda: any(True for _ in store.list(f"{BATCH_PREFIX}run-1/")), timeout=60)
        _until(lambda: batch_server.looks >= 3)  # waiting on it
        launched.send_signal(signal.SIGKILL)
        launched.wait(timeout=10)
    finally:
        if launched.poll() is None:
            launched.kill()
    (batch,) = batch_server.batches
    assert batch.status == "in_progress"
    batch_server.release()

    resumed = judge(store, make_setup("http://127.0.0.1:9/v1", batching(batch_server)), 300)

    assert len(batch_server.batches) == 1 and batch_server.lines_submitted == 300  # 0 resent
    assert batch_server.batches[0].id == batch.id and batch.status == "completed"
    assert all(v.reason == "judged" for v in resumed.verdicts) and resumed.calls == 300
    assert store.exists(f"{BATCH_PREFIX}run-1/{batch.id}.collected.json")


def test_pairs_are_batched_like_verdicts(
    judge_server: JudgeServer, batch_server: BatchServer, tmp_path: Path
) -> None:
    judge_server.script(default=prefers("BETTER"))
    batch_server.policy = prefers("BETTER")
    pairs = [
        (
            f"judge-cache/pairwise/{i:02d}.json",
            PairRequest(
                case_id=f"c{i}",
                input=f"case-{i:04d}",
                rubric="helpful",
                first="BETTER answer" if i % 2 else "plain answer",
                second="plain answer" if i % 2 else "BETTER answer",
            ),
        )
        for i in range(20)
    ]
    spender = Spender("run-1", "s", "agent:x", datetime.now(UTC))

    def compare(store: FileStore, setup: JudgeSetup) -> list[PairVerdict]:
        return judge_pair_requests(store, setup, pairs, spender, batch_size=20).verdicts

    in_sync = compare(FileStore(tmp_path / "sync"), make_setup(judge_server.base_url, None))
    in_batch = compare(
        FileStore(tmp_path / "batch"), make_setup(judge_server.base_url, batching(batch_server))
    )

    assert in_batch == in_sync
    assert [v.winner for v in in_batch] == ["second", "first"] * 10
    assert len(batch_server.batches) == 1


def test_the_mode_is_a_judge_setting_from_the_environment() -> None:
    env = {
        "ASSAY_JUDGE_MODEL": "m",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "ASSAY_JUDGE_MODE": "batch",
        "ASSAY_JUDGE_BATCH_POLL_SECONDS": "2.5",
    }
    settings = JudgeSettings.from_env(env)
    assert settings is not None and settings.mode == "batch"
    batching_ = settings.judge_setup([], False).batching
    assert batching_ is not None
    assert (batching_.base_url, batching_.poll_seconds) == ("http://127.0.0.1:9/v1", 2.5)
    synchronous = JudgeSettings.from_env({**env, "ASSAY_JUDGE_MODE": "sync"})
    assert synchronous is not None and synchronous.judge_setup([], False).batching is None
    with pytest.raises(InputError, match="ASSAY_JUDGE_MODE"):
        JudgeSettings.from_env({**env, "ASSAY_JUDGE_MODE": "bulk"})
    with pytest.raises(InputError, match="ASSAY_JUDGE_BATCH_POLL_SECONDS"):
        JudgeSettings.from_env({**env, "ASSAY_JUDGE_BATCH_POLL_SECONDS": "0"})


def _until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
