"""The evidence store interface.

Evidence objects are write-once: `put_once` never overwrites; re-writing identical bytes is a
no-op (so retried and re-run work is idempotent), different bytes are an integrity error. Only
the run aggregate uses the mutable `put`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

from assay.errors import EvidenceConflictError


class EvidenceStore(ABC):
    """Key/value object storage with write-once semantics. Keys use `/` separators."""

    uri: str

    @property
    @abstractmethod
    def write_guard(self) -> str:
        """How this store keeps objects write-once, reported in every run's metrics."""

    @abstractmethod
    def put_once(self, key: str, data: bytes) -> bool:
        """Write an immutable object.

        Returns:
            True when written now, False when identical content was already there.

        Raises:
            EvidenceConflictError: an object with different content exists under `key`.
        """

    def put_once_if_absent(self, key: str, data: bytes) -> bool:
        """Write an immutable object unless one exists, whatever its content (first writer wins)."""
        try:
            return self.put_once(key, data)
        except EvidenceConflictError:
            return False

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write or replace a mutable object (only the run aggregate is mutable)."""

    @abstractmethod
    def get(self, key: str) -> bytes:
        """Read an object; raises `NotFoundError` when absent."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether an object exists under `key`."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[str]:
        """Keys under the folder `prefix` (`runs/x` means `runs/x/`), in lexicographic order."""

    def list_starting(self, prefix: str) -> Iterator[str]:
        """Keys that start with `prefix` character for character, in lexicographic order: a
        prefix may end inside a name (`costs/2026/12/05/run-1-` finds that run's records of the
        day, not the day's others). This lists the folder `prefix` is in; a store that can list
        by a raw prefix answers it directly, without the folder's other keys."""
        folder = prefix[: prefix.rfind("/") + 1]
        return iter([key for key in self.list(folder) if key.startswith(prefix)])
