"""In-process progress notifications, so a terminal can draw a bar while a flow runs.

The flow reports finished chunks here; the CLI (same process) listens. Nothing is sent anywhere
else: the Prefect UI gets its own progress artifact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import Lock

Listener = Callable[[int, int], None]
"""Called with (chunks done, chunks total)."""

_listeners: list[Listener] = []
_lock = Lock()


def report(done: int, total: int) -> None:
    """Tell every listener that `done` of `total` chunks are finished."""
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(done, total)


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    """Receive progress reports while the block runs."""
    with _lock:
        _listeners.append(listener)
    try:
        yield
    finally:
        with _lock:
            _listeners.remove(listener)
