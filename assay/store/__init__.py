"""Evidence stores: one interface, chosen by URI.

`ASSAY_STORE` selects the store (`file://PATH`, default `file://.assay`).
"""

from __future__ import annotations

import os

from assay.store.base import EvidenceStore
from assay.store.file import FileStore

DEFAULT_STORE = "file://.assay"


def open_store(uri: str | None = None) -> EvidenceStore:
    """Open the store named by `uri`, else `ASSAY_STORE`, else the local default."""
    uri = uri or os.environ.get("ASSAY_STORE") or DEFAULT_STORE
    if uri.startswith("file://"):
        return FileStore(uri.removeprefix("file://"))
    raise ValueError(f"unsupported evidence store {uri!r} (use file://PATH)")


__all__ = ["DEFAULT_STORE", "EvidenceStore", "FileStore", "open_store"]
