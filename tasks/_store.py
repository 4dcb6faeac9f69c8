"""Opening the evidence store inside tasks, once per process.

Tasks receive a *store reference*: a URI (`file://…`, `s3://…`) or `block:NAME` for a saved
EvidenceStorage block. Opening is cached because a store may probe its server once per instance
(an S3 store: its conditional-write support), and a block load is an API call.
"""

from __future__ import annotations

from functools import lru_cache
from typing import cast

from assay.process_state import remembered
from assay.schemes import configuration, open_store
from assay.store import EvidenceStore

BLOCK_PREFIX = "block:"


def store_reference(store: str | None, storage_block: str | None) -> str:
    """The reference flows hand to tasks: the block when named, else the URI or its default."""
    if storage_block:
        return BLOCK_PREFIX + storage_block
    return open_store(store).uri


def evidence_store(reference: str) -> EvidenceStore:
    """The store behind a reference (cached per process and the schemes' configuration, such
    as an S3 endpoint)."""
    return _open(reference, configuration())


@lru_cache(maxsize=8)
def _open(reference: str, environment: tuple[str | None, ...]) -> EvidenceStore:
    if reference.startswith(BLOCK_PREFIX):
        from blocks import EvidenceStorage

        block = cast(EvidenceStorage, EvidenceStorage.load(reference.removeprefix(BLOCK_PREFIX)))
        return block.open()
    return open_store(reference)


remembered(__name__, "_open", _open.cache_clear)
