"""A finished run's judge figures come from its own cost records only (issue #36 item 4): the
ledger read at `finish_run` lists the run's keys of each day, not the day's whole ledger, which
grows with every judged call of every run."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest

from assay.finops.ledger import CostRecord, record_cost
from assay.runs.metrics import RunMetrics
from assay.runs.records import finish_run, start_run
from assay.store import FileStore
from tests.run_plans import a_plan


class SeeingStore(FileStore):
    """A file store that keeps every key it listed or read."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.seen: list[str] = []

    def list(self, prefix: str) -> Iterator[str]:
        keys = list(super().list(prefix))
        self.seen.extend(keys)
        return iter(keys)

    def list_starting(self, prefix: str) -> Iterator[str]:
        keys = list(super().list_starting(prefix))
        self.seen.extend(keys)
        return iter(keys)

    def get(self, key: str) -> bytes:
        self.seen.append(key)
        return super().get(key)


def _spend(run_id: str, chunk: int, calls: int, usd: float, **which: object) -> CostRecord:
    return CostRecord(
        run_id=run_id,
        chunk=chunk,
        suite="s",
        subject="agent:bot",
        model="m",
        prompt_version="p",
        calls=calls,
        input_tokens=10 * calls,
        output_tokens=calls,
        cost_usd=usd,
        at=datetime.now(UTC),
        **which,
    )


@pytest.fixture
def store(tmp_path: Path) -> SeeingStore:
    return SeeingStore(tmp_path / "store")


def test_finish_run_reads_only_its_own_cost_records(store: SeeingStore) -> None:
    plan = a_plan()
    aggregate = start_run(store, plan)
    for other in range(20):  # the day's other runs, one of them named like a longer twin
        record_cost(store, _spend(f"{plan.run_id}{other}" if other == 0 else f"r{other}", 0, 5, 9))
    a, b, c = (uuid4().hex for _ in range(3))
    record_cost(store, _spend(plan.run_id, 0, 1, 0.25, part=a))
    record_cost(store, _spend(plan.run_id, 0, 1, 0.25, part=b))
    record_cost(store, _spend(plan.run_id, 0, 2, 0.5, batch=uuid4().hex, covers=[a, b]))
    record_cost(store, _spend(plan.run_id, 1, 1, 0.25, part=c))  # a killed batch's call
    store.seen.clear()

    result = finish_run(store, aggregate, RunMetrics(cases=1, scored=1, passed=1))

    assert (result.metrics.judge_calls, result.metrics.judge_cost_usd) == (3, 0.75)
    costs = [key for key in store.seen if key.startswith("costs/")]
    assert costs and all(f"/{plan.run_id}-" in key for key in costs)
