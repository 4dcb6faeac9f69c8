"""The judging service: one cache key and layout for every judged verdict, old entries never read.

The judge is the real adapter against the test server on localhost (`tests/judge_server.py`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from assay.canonical import content_hash
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import CACHE_LAYOUT, cache_key
from assay.judge.openai_adapter import OpenAIJudge
from assay.judge.port import JudgePin, JudgeRequest, Verdict
from assay.judge.prompts import load_prompt
from assay.judge.service import JudgeSetup, judge_requests
from assay.store import FileStore
from tests.judge_server import JudgeServer, verdict

MODEL = "judge-test-model"
CONTENT = {"case": "sha256:abc", "output": "hmac-sha256:def", "rubric": "r", "threshold": 0.5}


def test_one_layout_per_kind_keyed_by_the_store_secret_the_pin_and_the_content(
    tmp_path: Path,
) -> None:
    hasher = OutputHasher(store_secret(FileStore(tmp_path / "a")))
    other_store = OutputHasher(store_secret(FileStore(tmp_path / "b")))
    pin = JudgePin(model=MODEL, prompt_version="default@1")
    keys = {kind: cache_key(hasher, kind, pin, CONTENT) for kind in ("check", "pairwise")}

    assert CACHE_LAYOUT == 2
    assert keys["check"].startswith("judge-cache/check/")
    assert keys["pairwise"].startswith("judge-cache/pairwise/")
    digest = keys["check"].removesuffix(".json").rsplit("/", 1)[-1]
    assert keys["check"] == f"judge-cache/check/{digest[:2]}/{digest}.json"
    assert cache_key(other_store, "check", pin, CONTENT) != keys["check"]
    other_pin = JudgePin(model=MODEL, prompt_version="default@2")
    assert cache_key(hasher, "check", other_pin, CONTENT) != keys["check"]
    assert cache_key(hasher, "check", pin, {**CONTENT, "threshold": 0.6}) != keys["check"]


def judge_setup(judge_server: JudgeServer) -> JudgeSetup:
    """The judging service's setup with the test's judge server as its only judge."""
    return JudgeSetup(
        make_judge=lambda: OpenAIJudge(MODEL, base_url=judge_server.base_url, api_key="test"),
        skip_reason="",
        model=MODEL,
        prompt_version=load_prompt().version,
    )


def test_a_verdict_under_the_old_layout_is_a_miss_never_a_misread(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    setup = judge_setup(judge_server)
    # The pre-layout-2 check key: a plain content hash under `judge-cache/<xx>/`.
    old = content_hash({**CONTENT, "model": MODEL, "prompt": setup.prompt_version})
    old_key = f"judge-cache/{old.removeprefix('sha256:')[:2]}/{old.removeprefix('sha256:')}.json"
    store.put_once_if_absent(
        old_key, Verdict(status="pass", score=1.0, reason="judged").model_dump_json().encode()
    )
    judge_server.script(default=verdict("fail", 0.1))
    hasher = OutputHasher(store_secret(store))
    request = JudgeRequest(case_id="c1", input="q", rubric="r", output="a", pass_threshold=0.5)
    key = cache_key(hasher, "check", setup.pin, CONTENT)

    first = judge_requests(
        store, setup, [(key, request)], run_id="r1", chunk=0, suite="s", subject="agent:x"
    )
    again = judge_requests(
        store, setup, [(key, request)], run_id="r2", chunk=0, suite="s", subject="agent:x"
    )

    assert key != old_key
    assert (first.calls, first.cache_hits, first.verdicts[0].status) == (1, 0, "fail")
    assert (again.calls, again.cache_hits, again.verdicts[0].status) == (0, 1, "fail")
    assert len(judge_server.requests) == 1


class CountingStore(FileStore):
    """A real FileStore that counts the reads and checks made of verdict-cache keys."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.calls: list[tuple[str, str]] = []

    def get(self, key: str) -> bytes:
        if key.startswith("judge-cache/"):
            self.calls.append(("get", key))
        return super().get(key)

    def exists(self, key: str) -> bool:
        if key.startswith("judge-cache/"):
            self.calls.append(("exists", key))
        return super().exists(key)


def test_a_cache_hit_is_one_store_read_and_the_same_verdict_and_fresh_reads_none(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = CountingStore(tmp_path / "evidence")
    setup = judge_setup(judge_server)
    judge_server.script(default=verdict("pass", 0.9))
    hasher = OutputHasher(store_secret(store))
    requests = [
        (
            cache_key(hasher, "check", setup.pin, {**CONTENT, "output": f"hmac-sha256:{n}"}),
            JudgeRequest(case_id=f"c{n}", input="q", rubric="r", output="a", pass_threshold=0.5),
        )
        for n in range(3)
    ]

    def judged(run_id: str, fresh: bool = False) -> tuple[int, int, list[Verdict]]:
        store.calls.clear()
        batch = judge_requests(
            store,
            replace(setup, fresh=fresh),
            requests,
            run_id=run_id,
            chunk=0,
            suite="s",
            subject="agent:x",
        )
        return batch.calls, batch.cache_hits, batch.verdicts

    first = judged("r1")
    again = judged("r2")
    hits = list(store.calls)
    fresh = judged("r3", fresh=True)
    fresh_reads = list(store.calls)

    assert first[:2] == (3, 0)
    assert again[:2] == (0, 3)
    assert [v.model_dump() for v in again[2]] == [v.model_dump() for v in first[2]]
    assert hits == [("get", key) for key, _ in requests]  # one read a hit, no exists
    assert fresh[:2] == (3, 0) and fresh_reads == []  # `fresh` never asks the cache
    assert len(judge_server.requests) == 6
