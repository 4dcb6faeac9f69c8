"""A reservation outlives no judging that holds it, and no crash (issue #38, batch judging).

A reservation lives `ASSAY_RESERVATION_TTL_SECONDS` past its last renewal. Judging that takes
longer than that — a batch waiting up to a day for the Batch API, or a slow synchronous judge —
keeps renewing it, so a concurrent run never sees the headroom it holds as free; a process that
stops renewing (a crash) lets it lapse one lifetime later. The judge is the real adapter (the
`openai` SDK) against the test server on localhost; the store is a real folder.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from assay.finops.budget import Budget
from assay.finops.reservations import (
    MAX_HELD_SECONDS,
    TTL_ENV,
    live_reservations,
    renew,
    reserve,
)
from assay.judge.service import judge_requests
from assay.store import FileStore
from tests.judge_server import JudgeServer, slow
from tests.test_spend_guard import batch, setup_for

JUDGE_SECONDS = 4.0
"""Each call's answer time: the judging lasts four lifetimes of one second."""


def test_a_judging_longer_than_the_lifetime_keeps_its_reservation_live(
    judge_server: JudgeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TTL_ENV, "1")
    store = FileStore(tmp_path / "evidence")
    judge_server.script(default=slow(JUDGE_SECONDS))
    setup = setup_for(judge_server, [Budget(name="team", limit_usd=100, period="day")])
    seen: list[tuple[float, int]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.append((time.monotonic(), len(live_reservations(store))))
            time.sleep(0.1)

    watcher = threading.Thread(target=watch)
    started = time.monotonic()
    watcher.start()
    try:
        judged = judge_requests(
            store,
            setup,
            batch(store, setup, "slow", 2),
            run_id="slow-run",
            chunk=0,
            suite="refunds",
            subject="agent:bot@v1",
        )
    finally:
        done.set()
        watcher.join()
    ended = time.monotonic()
    assert judged.calls == 2 and judged.decision is not None and judged.decision.allowed
    # From shortly after the reservation was written until the calls came back, it was live
    # at every look, also three lifetimes in.
    middle = [count for at, count in seen if started + 0.5 < at < ended - 0.5]
    assert middle and min(middle) == 1, seen
    assert any(at > started + 3 for at, count in seen if count == 1)
    assert live_reservations(store) == []  # released with the spend recorded


def test_a_reservation_no_one_renews_lapses_and_renewals_stop_at_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TTL_ENV, "3600")
    store = FileStore(tmp_path / "evidence")
    made = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    held = reserve(
        store,
        run_id="crashed",
        chunk=0,
        suite="refunds",
        subject="agent:bot@v1",
        amount_usd=40,
        now=made,
    )
    hours = [made + timedelta(hours=h) for h in (0.5, 1.5)]
    assert [len(live_reservations(store, at)) for at in hours] == [1, 0]  # nobody renewed it
    # Renewed two days in, it is live across the day folders readers list, then lapses.
    later = made + timedelta(days=2)
    assert renew(store, held, later)
    assert len(live_reservations(store, later + timedelta(minutes=30))) == 1
    assert live_reservations(store, later + timedelta(hours=2)) == []
    # Past the cap a renewal is refused: the reservation expires as it stands.
    past_cap = made + timedelta(seconds=MAX_HELD_SECONDS)
    assert not renew(store, held, past_cap)
