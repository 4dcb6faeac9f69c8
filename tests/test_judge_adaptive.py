"""Judge concurrency that adapts: by default the window of calls in flight grows toward what the
endpoint allows and halves on a 429, a 5xx or a timeout, every 429 is retried after its
`Retry-After` and counted, and a fixed number stays a bound that is never passed.

Against the local OpenAI-compatible judge server (`capacity=N`: a 429 beyond N requests at once),
through the real `openai` SDK and the judging service, with the settings a JudgeSettings block
hands out."""

from __future__ import annotations

import asyncio
import statistics
import threading
from pathlib import Path

import pytest

from assay.errors import InputError
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import cache_key
from assay.judge.concurrency import AdaptiveSlots, SharedSlots, run_slots
from assay.judge.config import (
    AUTO,
    AUTO_START_CONCURRENCY,
    DEFAULT_CONCURRENCY_CEILING,
    JudgeConfig,
)
from assay.judge.port import JudgePin, JudgeRequest
from assay.judge.service import judge_requests
from assay.store import FileStore
from blocks.judge_settings import JudgeSettings
from tests.judge_server import (
    JudgeServer,
    RecordedRequest,
    Reply,
    rate_limited,
    server_error,
    slow,
    verdict,
)

MODEL = "judge-test-1"
PROVIDER_LIMIT = 32
CHECKS = 1000


def _judge(
    judge_server: JudgeServer, tmp_path: Path, run_id: str, checks: int, **settings: object
) -> tuple[list[str], SharedSlots]:
    """Judge `checks` distinct outputs as one batch of run `run_id`; each verdict's status and the
    run's window in this process."""
    block = JudgeSettings(
        model=MODEL, base_url=judge_server.base_url, api_key="sk-test", **settings
    )
    setup = block.judge_setup([], fresh=True)
    store = FileStore(tmp_path / "store")
    hasher = OutputHasher(store_secret(store))
    pin = JudgePin(model=MODEL, prompt_version="v")
    requests = [
        JudgeRequest(case_id=f"c{i}", input="q", rubric="Is polite.", output=f"answer {i}")
        for i in range(checks)
    ]
    keyed = [(cache_key(hasher, "check", pin, {"case": r.case_id}), r) for r in requests]
    judged = judge_requests(store, setup, keyed, run_id=run_id, chunk=0, suite="s", subject="a:b")
    window = run_slots(run_id, setup.max_concurrency, setup.concurrency_ceiling)
    return [v.status for v in judged.verdicts], window


def _most_served(requests: list[RecordedRequest]) -> int:
    """The most requests the server was serving at once (those it refused not counted)."""
    events = sorted(
        (moment, step)
        for r in requests
        if not r.over_capacity and r.finished is not None
        for moment, step in ((r.arrived, 1), (r.finished, -1))
    )
    most = serving = 0
    for _, step in events:
        serving += step
        most = max(most, serving)
    return most


class Sampler(threading.Thread):
    """Reads a window's width every 10 ms once it has met congestion, until stopped."""

    def __init__(self, window: SharedSlots) -> None:
        super().__init__(daemon=True)
        self.window, self.widths, self.done = window, list[int](), threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.01):
            if self.window.congestion:
                self.widths.append(self.window.limit)


def test_the_default_window_converges_on_the_providers_limit_and_retries_every_429(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.script(default=slow(0.1, verdict("pass", 0.9)), capacity=PROVIDER_LIMIT)
    sampler = Sampler(run_slots("adaptive-run", AUTO, DEFAULT_CONCURRENCY_CEILING))
    sampler.start()

    statuses, window = _judge(judge_server, tmp_path, "adaptive-run", CHECKS)
    sampler.done.set()
    sampler.join()

    assert statuses == ["pass"] * CHECKS  # no check skipped
    requests = judge_server.requests
    refused = [r for r in requests if r.over_capacity]
    assert refused, "the window never probed past the provider's limit"
    assert all(r.status == 429 for r in refused)
    assert len(requests) == CHECKS + len(refused)  # every 429 retried, once it was answered
    assert window.congestion == {"429": len(refused)}  # and counted
    assert isinstance(window, AdaptiveSlots) and window is sampler.window
    assert _most_served(requests) == PROVIDER_LIMIT  # it grew from 16 to the provider's limit
    # ...and stayed near it: its width (calls waiting out a Retry-After or being recorded
    # included) once it had met the limit, on average
    mean = statistics.mean(sampler.widths)
    assert 0.6 * PROVIDER_LIMIT <= mean <= 1.25 * PROVIDER_LIMIT, sampler.widths
    assert window.peak <= DEFAULT_CONCURRENCY_CEILING


def test_a_fixed_number_is_a_bound_the_window_never_passes_nor_moves(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    """The judge would take 32 at once; 8 are asked for, and two 429s change nothing but their
    calls' timing."""
    judge_server.script(
        rate_limited(0.05),
        rate_limited(0.05),
        default=slow(0.05, verdict("pass", 0.9)),
        capacity=PROVIDER_LIMIT,
    )

    statuses, window = _judge(judge_server, tmp_path, "fixed-run", 120, max_concurrency=8)

    assert statuses == ["pass"] * 120
    assert len(judge_server.requests) == 122 and window.congestion == {"429": 2}
    assert judge_server.max_in_flight == 8
    assert (window.limit, window.peak) == (8, 8)  # the 429s were retried, the window unmoved


def test_a_5xx_halves_the_window(judge_server: JudgeServer, tmp_path: Path) -> None:
    judge_server.script(server_error(503), default=verdict("pass", 0.9))

    statuses, window = _judge(judge_server, tmp_path, "5xx-run", 20)

    assert statuses == ["pass"] * 20
    assert window.congestion == {"5xx": 1}
    assert window.limit < AUTO_START_CONCURRENCY


async def _opened(window: SharedSlots) -> None:
    """Take the window's first slot and answer it within its bound: it opens to its size."""
    assert window.limit == 1  # one call in flight until a reply is billed within its bound
    await window.acquire()
    window.answered(0.0)
    assert window.limit == window.size


def test_the_window_doubles_then_grows_by_one_and_is_cut_once_per_overshoot() -> None:
    async def scenario() -> None:
        window = AdaptiveSlots(ceiling=40, start=4)
        await _opened(window)
        for _ in range(3):
            await window.acquire()
        sent = 0.0
        for _ in range(4):  # slow start: +1 an answer while the window is full
            window.answered(sent)
            await window.acquire()
        assert window.limit == 8
        window.congested(sent, "429")  # a 429 keeps three quarters
        window.congested(sent, "429")  # sent before the cut: the same overshoot, no second cut
        assert (window.limit, window.congestion["429"]) == (6, 2)
        for _ in range(8):  # releasing down to the narrower window starts nothing new
            window.release()
        after = 1e12  # sent after the cut
        for _ in range(6):
            await window.acquire()
        for _ in range(6):  # additive: +1 per window of answers
            window.answered(after)
        assert window.limit == 7
        window.congested(after, "5xx")  # a 5xx (or a timeout) halves it
        assert window.limit == 3
        for _ in range(5):
            after += 1e6
            window.congested(after, "timeout")
        assert window.limit == 1  # never below one

    asyncio.run(scenario())


@pytest.mark.parametrize("concurrency", [AUTO, 8])
def test_a_judge_billing_past_max_tokens_has_one_call_in_flight(
    judge_server: JudgeServer, tmp_path: Path, concurrency: object
) -> None:
    """Its calls cost what it reports, not what their batch reserved: no reply is ever billed
    within its bound, so the window never opens past one call (tests/test_spend_stops.py)."""
    overbilled = Reply(content=verdict().content, usage=(50, 2_000_000), honours_max_tokens=False)
    judge_server.script(default=slow(0.01, overbilled))

    statuses, window = _judge(
        judge_server, tmp_path, "overbilled-run", 40, max_concurrency=concurrency
    )

    assert len(statuses) == 40
    assert (window.peak, judge_server.max_in_flight) == (1, 1)


def _first_alone(requests: list[RecordedRequest]) -> bool:
    """The first request was answered before any other arrived."""
    first, *others = sorted(requests, key=lambda r: r.arrived)
    return first.finished is not None and all(first.finished <= r.arrived for r in others)


@pytest.mark.parametrize("concurrency", [AUTO, 8])
def test_a_run_sends_its_first_call_alone_only_to_a_judge_not_seen_billing_within_its_bound(
    judge_server: JudgeServer, tmp_path: Path, concurrency: object
) -> None:
    """The process remembers what each endpoint billed last (`BillingMemory`): a long-lived
    service pays the lone first call once per judge, not once per run, and again after a reply
    billed past its bound."""
    within = slow(0.2, verdict("pass", 0.9))
    overbilled = slow(
        0.2, Reply(content=verdict().content, usage=(50, 2_000_000), honours_max_tokens=False)
    )
    runs: list[list[RecordedRequest]] = []
    for number, reply in enumerate([within, within, overbilled, within]):
        judge_server.reset()
        judge_server.script(default=reply)
        _judge(judge_server, tmp_path, f"run-{number}", 8, max_concurrency=concurrency)
        runs.append(judge_server.requests)

    first, trusted, overbilling, after_it = runs
    assert _first_alone(first)  # nothing known of this judge yet
    assert not _first_alone(trusted) and _most_served(trusted) >= 2  # its last reply was within
    # a judge that starts billing past its bound costs at most one window before it is one call
    assert not _first_alone(overbilling) and _most_served(overbilling) <= 8
    assert _first_alone(after_it)  # its latest reply was past its bound


def test_a_reply_past_its_bound_brings_the_window_back_to_one_and_a_slow_start() -> None:
    async def scenario() -> None:
        window = AdaptiveSlots(ceiling=40, start=2)
        await _opened(window)
        await window.acquire()
        for _ in range(3):
            window.answered(0.0)
            await window.acquire()
        assert window.limit == 5
        window.billed_past_bound()
        assert window.limit == 1
        window.answered(0.0)  # sent before the reply past its bound: still one
        assert window.limit == 1
        window.answered(float("inf"))  # sent since, billed within: one, growing from there
        for _ in range(5):
            window.release()
        await window.acquire()
        window.answered(float("inf"))
        assert window.limit == 2

    asyncio.run(scenario())


def test_a_fixed_window_goes_back_to_one_past_its_bound_and_reopens_within_it() -> None:
    async def scenario() -> None:
        window = SharedSlots(4)
        await _opened(window)
        window.billed_past_bound()
        assert (window.limit, window.most) == (1, 4)
        window.answered(float("inf"))
        assert window.limit == 4

    asyncio.run(scenario())


def test_the_ceiling_bounds_the_window() -> None:
    async def scenario() -> None:
        window = AdaptiveSlots(ceiling=3)
        assert window.most == 3
        await _opened(window)
        assert window.limit == 3
        for _ in range(2):
            await window.acquire()
        window.answered(0.0)
        assert window.limit == 3

    asyncio.run(scenario())


def test_auto_or_a_number_from_the_environment_and_the_ceiling() -> None:
    env = {"ASSAY_JUDGE_MODEL": MODEL}
    default = JudgeConfig.from_environ(env)
    assert default is not None
    assert (default.max_concurrency, default.concurrency_ceiling) == (
        AUTO,
        DEFAULT_CONCURRENCY_CEILING,
    )
    config = JudgeConfig.from_environ(
        env | {"ASSAY_JUDGE_CONCURRENCY": " Auto ", "ASSAY_JUDGE_CONCURRENCY_CEILING": "40"}
    )
    assert config is not None and (config.max_concurrency, config.concurrency_ceiling) == (
        AUTO,
        40,
    )
    fixed = JudgeConfig.from_environ(env | {"ASSAY_JUDGE_CONCURRENCY": "12"})
    assert fixed is not None and fixed.max_concurrency == 12
    with pytest.raises(InputError, match="ASSAY_JUDGE_CONCURRENCY: input should be `auto` or"):
        JudgeConfig.from_environ(env | {"ASSAY_JUDGE_CONCURRENCY": "fast"})
    with pytest.raises(InputError) as raised:
        JudgeConfig.from_environ(env | {"ASSAY_JUDGE_CONCURRENCY_CEILING": "0"})
    assert raised.value.source == "ASSAY_JUDGE_CONCURRENCY_CEILING"
