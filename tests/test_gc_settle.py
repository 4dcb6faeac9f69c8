"""A long-lived service freezes what its runs leave alive once there is much of it
(`assay.gcpause.settle`, called after every run `assay serve` runs): a later full collection then
walks only what later runs leave (35–50 ms of held GIL per 1,000-case judged run before, 2–4 ms
after: bench/README.md, session 13)."""

from __future__ import annotations

import gc
import weakref

from assay.gcpause import SETTLE_AFTER_OBJECTS, settle


class _Node:
    """A tracked object that lives on (as a service's caches and imported modules do)."""

    def __init__(self, number: int) -> None:
        self.number = number


def _aged(count: int) -> list[_Node]:
    kept = [_Node(number) for number in range(count)]
    gc.collect()  # survivors reach the oldest generation
    return kept


def test_settle_leaves_a_small_oldest_generation_alone() -> None:
    gc.collect()
    gc.freeze()  # what the test process holds already is not this test's
    kept = _aged(SETTLE_AFTER_OBJECTS // 10)

    settle()

    # still in the collector's sight (a freeze would have moved them out of generation 2)
    assert any(found is kept[0] for found in gc.get_objects(generation=2))


def test_settle_freezes_a_large_oldest_generation_and_frees_what_is_dropped() -> None:
    kept = _aged(2 * SETTLE_AFTER_OBJECTS)

    settle()

    assert not any(found is kept[0] for found in gc.get_objects(generation=2))  # frozen
    assert len(gc.get_objects(generation=2)) < SETTLE_AFTER_OBJECTS
    probe = weakref.ref(kept[0])
    del kept
    assert probe() is None  # frozen, and still freed when its last reference went
