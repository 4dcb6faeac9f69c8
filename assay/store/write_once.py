"""Write a record once: the first writer wins, and a retry gets the first writer's record back."""

from __future__ import annotations

from typing import Generic, TypeVar

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


class Shelf(Generic[RecordT]):
    """Write-once records of one kind, each under `<prefix><id>.json` (`monitor/<id>.json`, …)."""

    def __init__(self, prefix: str, model: type[RecordT]) -> None:
        self.prefix = prefix
        self.model = model

    def key(self, record_id: str) -> str:
        """Where the record `record_id` is kept."""
        return f"{self.prefix}{record_id}.json"

    def put(self, store: EvidenceStore, record_id: str, record: RecordT) -> RecordT:
        """Write the record once; when one is already there (a retry), return that first one."""
        return write_once(store, self.key(record_id), record)

    def get(self, store: EvidenceStore, record_id: str) -> RecordT:
        """A recorded record (raises `NotFoundError` when there is none)."""
        return self.model.model_validate_json(store.get(self.key(record_id)))
