"""Evidence stores: one interface, a local folder or an S3-compatible bucket.

A store is opened by URI through `assay.schemes.open_store`: `ASSAY_STORE` selects it,
`file://PATH` (default `file://.assay`) or `s3://BUCKET/PREFIX` (boto3's standard credential
chain; `AWS_ENDPOINT_URL` for S3-compatible servers).
"""

from __future__ import annotations

from assay.errors import StoreUnavailableError
from assay.store.base import EvidenceStore
from assay.store.file import FileStore

__all__ = ["EvidenceStore", "FileStore", "StoreUnavailableError"]
