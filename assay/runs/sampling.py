"""Seeded case sampling: which cases a run scores, reproducibly."""

from __future__ import annotations

import random
from collections.abc import Sequence

from assay.outputs import OutputsIndex, index_outputs
from assay.suites.suite import Suite


def select_cases(case_ids: Sequence[str], sample: int | None, seed: int) -> list[str]:
    """All case ids, or `sample` of them chosen by `seed` — the same choice every time.

    The result keeps suite order so evidence chunks line up with the suite file.
    """
    if sample is None or sample >= len(case_ids):
        return list(case_ids)
    if sample < 1:
        raise ValueError("--sample must be at least 1")
    chosen = set(random.Random(seed).sample(sorted(case_ids), sample))
    return [case_id for case_id in case_ids if case_id in chosen]


def index_run_outputs(
    suite: Suite, outputs: str, sample: int | None, seed: int, chunk_size: int
) -> OutputsIndex:
    """Validate a run's outputs against its suite and cut the selected cases into slices."""
    case_ids = [case.id for case in suite.cases]
    return index_outputs(outputs, set(case_ids), select_cases(case_ids, sample, seed), chunk_size)
