"""Local filesystem evidence store (`file://PATH`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from assay.errors import EvidenceConflictError, NotFoundError, StoreUnavailableError, shown
from assay.store.base import EvidenceStore


class FileStore(EvidenceStore):
    """Evidence on a local directory.

    Write-once objects are written to a temporary file and hard-linked into place: `link` fails
    when the target exists, which makes the check-and-write atomic across processes, and a reader
    never sees a half-written object.

    A file-system error (a full disk, a read-only mount, no permission, a name too long) makes
    the store as unusable as an outage makes an S3 store: `StoreUnavailableError`, one line
    naming the folder, the operation and the key.
    """

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.uri = f"file://{root}"

    @property
    def write_guard(self) -> str:
        """Write-once by hard link: creating a link fails if the target exists."""
        return "atomic-link"

    @contextmanager
    def _io(self, operation: str, key: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise StoreUnavailableError(
                f"file store {self.root}: {operation} {shown(key)} failed: "
                f"{exc.strerror or type(exc).__name__}"
            ) from exc

    def _path(self, key: str) -> Path:
        parts = key.split("/")
        if not key or any(part in ("", ".", "..") for part in parts):
            raise ValueError(f"invalid evidence key {key!r}")
        return self.root.joinpath(*parts)

    def _temp(self, target: Path, data: bytes) -> str:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return temp

    def put_once(self, key: str, data: bytes) -> bool:
        with self._io("write", key):
            return self._put_once(key, data)

    def _put_once(self, key: str, data: bytes) -> bool:
        target = self._path(key)
        if target.exists():
            return self._same(key, target, data)
        temp = self._temp(target, data)
        try:
            os.link(temp, target)
        except FileExistsError:
            return self._same(key, target, data)
        finally:
            os.unlink(temp)
        return True

    @staticmethod
    def _same(key: str, target: Path, data: bytes) -> bool:
        if target.read_bytes() != data:
            raise EvidenceConflictError(f"evidence object {key} exists with different content")
        return False

    def put(self, key: str, data: bytes) -> None:
        target = self._path(key)
        with self._io("write", key):
            os.replace(self._temp(target, data), target)

    def get(self, key: str) -> bytes:
        path = self._path(key)
        with self._io("read", key):
            try:
                return path.read_bytes()
            except FileNotFoundError:
                raise NotFoundError(f"no evidence object {key} in {self.uri}") from None

    def exists(self, key: str) -> bool:
        path = self._path(key)
        with self._io("check", key):
            return path.is_file()

    def list(self, prefix: str) -> Iterator[str]:
        base = self.root / prefix.rstrip("/") if prefix.strip("/") else self.root
        with self._io("list", prefix):
            if not base.is_dir():
                return iter(())
            keys = sorted(self._keys_in(base))
        return iter(keys)

    def list_starting(self, prefix: str) -> Iterator[str]:
        """Only the folder's entries whose names start with the rest of `prefix` are looked at
        (a file is kept, a folder's files all are): the folder's other keys are never listed."""
        folder, _, start = prefix.rpartition("/")
        base = self._path(folder) if folder else self.root
        keys: list[str] = []
        with self._io("list", prefix):
            try:
                entries = [entry for entry in os.scandir(base) if entry.name.startswith(start)]
            except (FileNotFoundError, NotADirectoryError):
                return iter(())
            for entry in entries:
                path = Path(entry.path)
                if entry.is_dir():
                    keys.extend(self._keys_in(path))
                elif entry.is_file() and not entry.name.startswith(".tmp-"):
                    keys.append(path.relative_to(self.root).as_posix())
        return iter(sorted(keys))

    def _keys_in(self, folder: Path) -> Iterator[str]:
        """The keys of every object under `folder` (unsorted; never a write's temporary file)."""
        return (
            path.relative_to(self.root).as_posix()
            for path in folder.rglob("*")
            if path.is_file() and not path.name.startswith(".tmp-")
        )
