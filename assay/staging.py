"""In-process staging of inline outputs: how `POST /runs` hands a request's outputs to a flow.

A flow must receive outputs by reference (Prefect records every parameter), and inline outputs
must never be written anywhere — not to a temporary file, not to the store. So the service puts
the request's JSON Lines in this process's memory under a random name and passes the flow the
reference `inline://<name>/outputs.jsonl`; `assay.outputs` reads it like a file. The entry lives
only for the `staged` block around the run and is dropped when the run ends, whatever its end.

The reference means nothing outside this process: another process (a worker, a Dask node, a
resumed run) finds nothing under it and reports an input error, never an empty run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from threading import Lock
from typing import Final
from uuid import uuid4

from assay.errors import InputError

SCHEME: Final = "inline://"
_NAME: Final = "/outputs.jsonl"

_area: dict[str, bytes] = {}
_lock = Lock()


@contextmanager
def staged(data: bytes) -> Iterator[str]:
    """Stage JSON Lines for the duration of the block; yields the reference to hand a flow."""
    reference = f"{SCHEME}{uuid4().hex}{_NAME}"
    with _lock:
        _area[reference] = data
    try:
        yield reference
    finally:
        with _lock:
            del _area[reference]


def read(reference: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of a staged entry; InputError when it is gone (or never was here)."""
    with _lock:
        data = _area.get(reference)
    if data is None:
        raise InputError(
            reference, "inline outputs exist only while the request that sent them runs"
        )
    return data[start:end]


def exists(reference: str) -> bool:
    """Whether a staged entry is present in this process."""
    with _lock:
        return reference in _area


def entries() -> int:
    """How many entries are staged now (the service reports it; tests check it drops to 0)."""
    with _lock:
        return len(_area)
