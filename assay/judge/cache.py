"""The verdict cache's keys: one layout for every kind of judged verdict.

`cache_key`: `judge-cache/<kind>/<xx>/<digest>.json`, where the digest is a keyed hash (the
store's HMAC secret) of the kind, the judge pin, what the judge sees and `CACHE_LAYOUT`. Keyed,
because the content includes live user text that a plain hash of a short answer could be guessed
back from; versioned, so entries written under an older layout are never found again (a miss
costs a call; a misread would be a wrong verdict). The service (`assay.judge.service`) reads and
writes the entries; `cached_record` reads one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from assay.canonical import canonical_json
from assay.errors import NotFoundError
from assay.hashing import OutputHasher
from assay.judge.port import JudgePin
from assay.store import EvidenceStore

CACHE_PREFIX: Final = "judge-cache/"
CACHE_LAYOUT: Final = 2
"""Bumped whenever what a cache key covers changes: older entries then become misses."""
CacheKind = Literal["check", "pairwise", "calibration", "outcome"]


def cache_key(
    hasher: OutputHasher, kind: CacheKind, pin: JudgePin, content: Mapping[str, Any]
) -> str:
    """The verdict-cache key of one judged question (see the module docstring).

    Args:
        hasher: The store's keyed hash (`OutputHasher(store_secret(store))`).
        kind: Which caller's verdicts these are; kinds never share an entry.
        pin: The judge (model pin, prompt version) the verdict comes from.
        content: Everything the judge sees that decides the verdict (texts, rubric, threshold).
    """
    material = {"layout": CACHE_LAYOUT, "kind": kind, "judge": pin.model_dump(), **content}
    digest = hasher(canonical_json(material)).removeprefix("hmac-sha256:")
    return f"{CACHE_PREFIX}{kind}/{digest[:2]}/{digest}.json"


def repeat_key(key: str, repeat: int) -> str:
    """The cache key of repeat `repeat` (0-based) of a question: repeat 0 is the question's own
    key, so a run with repeats reuses what a single-verdict run paid for, and each further
    repeat has its own entry (a re-run spends nothing)."""
    return key if repeat == 0 else f"{key.removesuffix('.json')}.r{repeat}.json"


def cached_record(store: EvidenceStore, key: str) -> bytes | None:
    """The verdict-cache entry under `key`, or None when there is none: one read of the store.

    A re-run's questions are mostly hits, so the entry is read outright rather than checked for
    (`exists`) and then read: half the store round trips (a 1,000-case cached re-run made 2,000).
    """
    try:
        return store.get(key)
    except NotFoundError:
        return None
