"""Evidence stores: one interface, chosen by URI.

`ASSAY_STORE` selects the store: `file://PATH` (default `file://.assay`) or `s3://BUCKET/PREFIX`
(boto3's standard credential chain; `AWS_ENDPOINT_URL` for S3-compatible servers).
"""

from __future__ import annotations

import os

from assay.errors import StoreUnavailableError
from assay.store.base import EvidenceStore
from assay.store.file import FileStore

DEFAULT_STORE = "file://.assay"


def open_store(uri: str | None = None) -> EvidenceStore:
    """Open the store named by `uri`, else `ASSAY_STORE`, else the local default.

    S3 support is imported only when an `s3://` store is opened, so commands on a local store
    do not pay for loading boto3 (and `assay.s3`, which imports this package, loads cleanly).
    """
    uri = uri or os.environ.get("ASSAY_STORE") or DEFAULT_STORE
    if uri.startswith("file://"):
        return FileStore(uri.removeprefix("file://"))
    if uri.startswith("s3://"):
        from assay.s3 import parse_s3_uri
        from assay.store.s3 import S3Store

        bucket, prefix = parse_s3_uri(uri)
        return S3Store(bucket, prefix)
    raise ValueError(f"unsupported evidence store {uri!r} (use file://PATH or s3://BUCKET/PREFIX)")


__all__ = ["DEFAULT_STORE", "EvidenceStore", "FileStore", "StoreUnavailableError", "open_store"]
