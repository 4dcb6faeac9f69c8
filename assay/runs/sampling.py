"""Seeded case sampling: which cases a run scores, reproducibly — and the outputs index of a
run, read once per process.

A run launched in this process (`flows.launch`) validates its outputs before the flow starts;
the index that pass builds is kept here, keyed by what was read (each local file's path, size
and modification time, or the staged inline outputs), and the flow's ingest takes it instead of
reading the outputs in full again. Each chunk still checks the bytes of its slice against the
SHA-256 the index pinned (`assay.outputs.slices.read_slice`), so outputs changed in between fail
closed. Outputs in S3 have no cheap signature and are indexed again.
"""

from __future__ import annotations

import os
import random
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from assay import schemes
from assay.gcpause import gc_paused
from assay.outputs.index import index_outputs
from assay.outputs.reference import OutputsReference
from assay.outputs.slices import OutputsIndex
from assay.outputs.sources import output_sources
from assay.process_state import remembered
from assay.suites.suite import Suite

TRUSTED_INDEXES = 8
"""Indexes kept per process: the runs in flight at once in one service, with room to spare."""
_trusted: OrderedDict[tuple[object, ...], OutputsIndex] = OrderedDict()
_lock = threading.Lock()
remembered(__name__, "_trusted", _trusted.clear, _lock)


def select_cases(case_ids: Sequence[str], sample: int | None, seed: int) -> list[str]:
    """All case ids, or `sample` of them chosen by `seed` — the same choice every time.

    The result keeps suite order so evidence chunks line up with the suite file. `sample` is
    within `RunOptions.sample`'s bounds.
    """
    if sample is None or sample >= len(case_ids):
        return list(case_ids)
    chosen = set(random.Random(seed).sample(sorted(case_ids), sample))
    return [case_id for case_id in case_ids if case_id in chosen]


def _signature(reference: OutputsReference) -> tuple[object, ...] | None:
    """What the outputs are now, cheaply: None when that cannot be told without reading them."""
    location = schemes.locate(reference.location, what="outputs")
    if isinstance(location.scheme, schemes.InlineScheme):
        return (location.uri,)  # staged bytes never change while they are staged
    if not isinstance(location.scheme, schemes.FileScheme) or not Path(location.rest).exists():
        return None
    sources = output_sources(location.uri, (".jsonl", ".json"))
    return tuple(
        (source.name, stat.st_size, stat.st_mtime_ns)
        for source in sources
        for stat in [os.stat(source.name)]
    )


def index_run_outputs(
    suite: Suite, outputs: OutputsReference, sample: int | None, seed: int, chunk_size: int
) -> OutputsIndex:
    """Validate a run's outputs against its suite and cut the selected cases into slices; an
    index built in this process from the same unchanged outputs is reused, not read again."""
    case_ids = [case.id for case in suite.cases]
    signature = _signature(outputs)
    key = (str(outputs), hash(tuple(case_ids)), sample, seed, chunk_size, signature)
    if signature is not None:
        with _lock:
            known = _trusted.get(key)
        if known is not None:
            return known
    with gc_paused():  # every line is parsed and dropped; the index keeps ids and offsets
        index = index_outputs(
            outputs, set(case_ids), select_cases(case_ids, sample, seed), chunk_size
        )
    if signature is not None and _signature(outputs) == signature:  # unchanged while read
        with _lock:
            _trusted[key] = index
            while len(_trusted) > TRUSTED_INDEXES:
                _trusted.popitem(last=False)
    return index
