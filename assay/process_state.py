"""What a process remembers between runs, and `reset_process_state()`, which forgets it.

Each cache registers itself once, where it is defined (`remembered(__name__, "_name", forget)`),
so this module imports no layer above it and a cache in `tasks/` or `blocks/` is forgotten as
soon as its module is imported. docs/architecture.md ("What a process remembers") lists every
cache, frozen object and context variable with its key, lifetime and invalidation;
tests/test_process_state.py fails on one the page does not name or that is not registered here.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import NamedTuple


class _Forgetter(NamedTuple):
    forget: Callable[[], None]
    lock: AbstractContextManager[object]


_REMEMBERED: dict[str, _Forgetter] = {}
_REMEMBERED_LOCK = threading.Lock()


def remembered(
    module: str,
    name: str,
    forget: Callable[[], None],
    lock: AbstractContextManager[object] | None = None,
) -> None:
    """Register the module-level cache `module.name`: `reset_process_state` calls `forget`,
    holding `lock` when given (the lock the module takes around its own reads and writes)."""
    with _REMEMBERED_LOCK:
        _REMEMBERED[f"{module}.{name}"] = _Forgetter(forget, lock or nullcontext())


def remembered_names() -> frozenset[str]:
    """`module.name` of every cache registered so far (by the modules imported so far)."""
    with _REMEMBERED_LOCK:
        return frozenset(_REMEMBERED)


def reset_process_state() -> None:
    """Forget every registered cache and unfreeze what `gc.freeze` froze.

    The frozen objects are the suites and compiled scorers the caches held: once forgotten they
    no longer live for the process, so the collector may look at them again (the next suite
    loaded is frozen again). Safe while runs are in flight: a forgotten entry is rebuilt from its
    source on the next use.
    """
    with _REMEMBERED_LOCK:
        forgetters = list(_REMEMBERED.values())
    for forgetter in forgetters:
        with forgetter.lock:
            forgetter.forget()
    gc.unfreeze()
