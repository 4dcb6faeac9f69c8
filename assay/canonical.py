"""Canonical JSON and content hashes: one definition used for every content address."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 characters kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def text_hash(canonical: str) -> str:
    """`sha256:<hex>` of already-canonical JSON text."""
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def content_hash(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `value`."""
    return text_hash(canonical_json(value))
