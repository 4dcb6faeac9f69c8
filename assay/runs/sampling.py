"""Seeded case sampling: which cases a run scores, reproducibly."""

from __future__ import annotations

import random
from collections.abc import Sequence


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
