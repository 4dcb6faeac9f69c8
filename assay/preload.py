"""Heavy libraries a run will need, imported in a background thread from its start, so that they
load while the run waits on its Prefect API and store rather than after it (bench/README.md).

An import error is left to the code that needs the library: it imports it again and raises there.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterable


def preload(modules: Iterable[str]) -> None:
    """Start importing `modules`, in order, in a daemon thread; returns at once."""
    names = tuple(modules)

    def load() -> None:
        for name in names:
            with contextlib.suppress(ImportError):
                importlib.import_module(name)

    threading.Thread(target=load, name="assay-preload", daemon=True).start()
