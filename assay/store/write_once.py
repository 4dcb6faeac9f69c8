"""Write a record once: the first writer wins, and a retry gets the first writer's record back."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

from assay.store.base import EvidenceStore

RecordT = TypeVar("RecordT", bound=BaseModel)


def write_once(store: EvidenceStore, key: str, record: RecordT) -> RecordT:
    """Write `record` under `key` unless something is there; return what the store holds.

    A retried task that rebuilt its record (with a later timestamp, say) gets the first one
    back, so every caller reports what is actually recorded.
    """
    if store.put_once_if_absent(key, record.model_dump_json().encode()):
        return record
    return type(record).model_validate_json(store.get(key))
