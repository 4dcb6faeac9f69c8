"""Keeping Python's cyclic garbage collector off data that lives on.

Loading a 100,000-case suite allocates millions of long-lived objects in one go. The collector
reacts by rescanning the growing heap again and again (measured: 4.2 s to load with it, 1.6 s
without). These steps build acyclic data that lives on, so there is nothing for it to find.

A long-lived service gathers such data too, run after run: the modules its first runs import
(Prefect's engine, the judge's SDK), the clients it opens, its caches. Each full collection walks
all of it — 35–50 ms of held GIL once in every 1,000-case judged run, on the judge's event loop
or before the answer (bench/README.md, session 13) — so after a run it is frozen (`settle`).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

SETTLE_AFTER_OBJECTS: Final = 25_000
"""Objects in the collector's oldest generation past which `settle` collects and freezes: a
full collection of this many costs a few milliseconds."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic collector for the block; restore its previous state afterwards."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def kept_long() -> Iterator[None]:
    """`gc_paused` for a block that builds data meant to live on (a loaded suite): on a normal
    exit everything tracked is frozen (`gc.freeze`), so the collector does not rescan it in each
    generation as it ages (a 100,000-case suite: three collections, 0.8 s, before the run froze
    it anyway)."""
    with gc_paused():
        yield
        gc.freeze()


def settle() -> None:
    """After a run in a long-lived process (`assay serve`, when no other run is in flight): when
    the collector's oldest generation holds more than `SETTLE_AFTER_OBJECTS`, collect once and
    freeze what is left, so that later full collections walk only what later runs leave. What is
    frozen and later dropped is still freed when its last reference goes (only cycles among it
    are not collected until `reset_process_state` unfreezes)."""
    if len(gc.get_objects(generation=2)) <= SETTLE_AFTER_OBJECTS:
        return
    gc.collect()
    gc.freeze()
