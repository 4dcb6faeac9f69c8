"""Where data lives, named by URI: the one registry of location schemes.

Every evidence store and every reader of user data (candidate outputs, release trials, outcome
records, session signals, calibration sets) names its location by URI, and this module alone
tells the schemes apart:

- `file` — a local file or folder: `file://PATH`, or a plain path;
- `s3` — an object or a key prefix of a bucket: `s3://BUCKET[/KEY-OR-PREFIX]`;
- `inline` — outputs staged in this process by the service (`inline://NAME/outputs.jsonl`, see
  `assay.staging`); they exist only while the request that sent them runs.

`locate` parses a URI into its `Scheme` and the rest; each scheme opens an evidence store (if one
can live there), lists the objects at a location and reads byte ranges of an object. Adding a
backend is one `Scheme` subclass in `SCHEMES`. A URI with any other `NAME://` is one
`UnknownSchemeError`, never a local path that happens not to exist.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Final

from assay import staging
from assay.errors import InputError, OutputsChangedError, shown

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

    from assay.s3 import ObjectPin, ObjectReader
    from assay.store.base import EvidenceStore

DEFAULT_STORE: Final = "file://.assay"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


class UnknownSchemeError(InputError, ValueError):
    """A URI names a scheme that is not registered, or one this use does not accept (an
    evidence store on `inline://`). A `ValueError` too, so pydantic validators report it."""


@dataclass(frozen=True)
class Location:
    """A parsed URI: its scheme and what follows `SCHEME://` (a plain path: the path)."""

    scheme: Scheme
    uri: str
    """As given: what errors name."""
    rest: str


class Scheme(ABC):
    """One kind of location: how to open a store there, list its objects and read them."""

    name: ClassVar[str]
    form: ClassVar[str]
    """How a location of this scheme is written, for error messages."""
    holds_stores: ClassVar[bool] = False
    """Whether an evidence store can live there (`open_store`)."""

    def open_store(
        self, location: Location, s3_client: Callable[[], S3Client] | None
    ) -> EvidenceStore:
        """The evidence store at a location (only schemes that `holds_stores`)."""
        raise NotImplementedError

    @abstractmethod
    def objects(self, location: Location, suffixes: tuple[str, ...], what: str) -> list[str]:
        """The objects at a location, in key or path order: the one it names, or every object
        under a folder or prefix whose name ends with one of `suffixes`."""

    @abstractmethod
    def one_object(self, location: Location, what: str) -> str:
        """The single object a location names; InputError when it names none."""

    @abstractmethod
    def read(
        self, location: Location, start: int, end: int, pin: ObjectPin | None
    ) -> tuple[bytes, ObjectPin | None]:
        """Bytes [start, end) of an object (an S3 object: the pinned one) and its pin."""


class FileScheme(Scheme):
    name = "file"
    form = "file://PATH"
    holds_stores = True

    def open_store(
        self, location: Location, s3_client: Callable[[], S3Client] | None
    ) -> EvidenceStore:
        from assay.store.file import FileStore

        return FileStore(location.rest)

    def objects(self, location: Location, suffixes: tuple[str, ...], what: str) -> list[str]:
        path = Path(location.rest)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes))
            if not files:
                raise InputError(location.uri, f"the folder holds no {_named(suffixes)} files")
            return [str(p) for p in files]
        return [self._file(location, f"no such {what} file or folder")]

    def one_object(self, location: Location, what: str) -> str:
        return self._file(location, f"no such {what} file")

    def _file(self, location: Location, missing: str) -> str:
        path = Path(location.rest)
        if not path.is_file():
            raise InputError(location.uri, not_a_file(path) or missing)
        return str(path)

    def read(
        self, location: Location, start: int, end: int, pin: ObjectPin | None
    ) -> tuple[bytes, ObjectPin | None]:
        with open(location.rest, "rb") as handle:
            handle.seek(start)
            return handle.read(end - start), pin


class S3Scheme(Scheme):
    name = "s3"
    form = "s3://BUCKET/PREFIX"
    holds_stores = True

    def open_store(
        self, location: Location, s3_client: Callable[[], S3Client] | None
    ) -> EvidenceStore:
        from assay.store.s3 import S3Store

        bucket, prefix = parse_s3_uri(location.uri)
        return S3Store(bucket, prefix, client=s3_client() if s3_client else None)

    def objects(self, location: Location, suffixes: tuple[str, ...], what: str) -> list[str]:
        bucket, prefix = parse_s3_uri(location.uri)
        keys = [k for k in object_reader().keys(bucket, prefix) if k.endswith(suffixes)]
        if not keys:
            raise InputError(location.uri, f"no {_named(suffixes)} objects under this S3 prefix")
        return [f"{self.name}://{bucket}/{key}" for key in keys]

    def one_object(self, location: Location, what: str) -> str:
        return location.uri

    def read(
        self, location: Location, start: int, end: int, pin: ObjectPin | None
    ) -> tuple[bytes, ObjectPin | None]:
        from assay.s3 import ObjectChangedError

        bucket, _, key = location.rest.partition("/")
        try:
            return object_reader().read_pinned(bucket, key, start, end, pin)
        except ObjectChangedError as exc:
            raise OutputsChangedError(location.uri, str(exc)) from None


class InlineScheme(Scheme):
    name = "inline"
    form = "inline://NAME"

    def objects(self, location: Location, suffixes: tuple[str, ...], what: str) -> list[str]:
        return [self.one_object(location, what)]

    def one_object(self, location: Location, what: str) -> str:
        if not staging.exists(location.uri):
            raise InputError(location.uri, f"no such staged {what} in this process")
        return location.uri

    def read(
        self, location: Location, start: int, end: int, pin: ObjectPin | None
    ) -> tuple[bytes, ObjectPin | None]:
        return staging.read(location.uri, start, end), pin


SCHEMES: Final[dict[str, Scheme]] = {
    scheme.name: scheme for scheme in (FileScheme(), S3Scheme(), InlineScheme())
}
STORES: Final = tuple(name for name, scheme in SCHEMES.items() if scheme.holds_stores)
"""The schemes an evidence store can live on."""
SHARED: Final = ("file", "s3")
"""The schemes of inputs a flow may read in another process (trials, records, signals,
calibration sets): not `inline`, which exists only in the process that staged it."""


def is_inline(uri: str) -> bool:
    """Whether `uri` is an `inline://` reference (whether or not its entry still exists)."""
    found = _SCHEME.match(uri)
    return found is not None and found.group(1).lower() == InlineScheme.name


def locate(
    uri: str, accepted: Collection[str] = tuple(SCHEMES), what: str = "data", *, paths: bool = True
) -> Location:
    """Parse `uri` into its scheme and the rest.

    Args:
        uri: `NAME://REST` for a registered scheme, or a plain local path.
        accepted: The schemes this use accepts.
        what: What is kept there (`outputs`, `an evidence store`), for the error.
        paths: Whether a plain path is accepted (as `file`); evidence stores need a URI.

    Raises:
        UnknownSchemeError: the scheme is not registered, not accepted here, or missing where
            `paths` is False.
    """
    found = _SCHEME.match(uri)
    name = found.group(1).lower() if found else FileScheme.name
    scheme = SCHEMES.get(name)
    forms = " or ".join(SCHEMES[n].form for n in accepted)
    if found is None and not paths:
        raise UnknownSchemeError(uri, f"{what} is named by a URI (use {forms})")
    if scheme is None or name not in accepted:
        raise UnknownSchemeError(uri, f"unsupported scheme {shown(name)} for {what} (use {forms})")
    return Location(scheme, uri, uri[found.end() :] if found else uri)


def objects(
    uri: str, what: str, suffixes: tuple[str, ...] = (".jsonl",), accepted: Collection[str] = SHARED
) -> list[str]:
    """The objects behind a file, folder, `s3://` prefix (or staged reference), in order."""
    location = locate(uri, accepted, what)
    return location.scheme.objects(location, suffixes, what)


def one_object(uri: str, what: str, accepted: Collection[str] = SHARED) -> str:
    """The one object a file path or `s3://` key names (a folder or prefix is refused)."""
    location = locate(uri, accepted, what)
    return location.scheme.one_object(location, what)


def read(
    name: str, start: int, end: int, pin: ObjectPin | None = None
) -> tuple[bytes, ObjectPin | None]:
    """Bytes [start, end) of the object `name` (as `objects` gave it) and its pin."""
    location = locate(name)
    return location.scheme.read(location, start, end, pin)


def open_store(
    uri: str | None = None, *, s3_client: Callable[[], S3Client] | None = None
) -> EvidenceStore:
    """Open the evidence store named by `uri`, else `ASSAY_STORE`, else the local default.

    `s3_client` makes the client of an `s3://` store (the EvidenceStorage block's credentials);
    without it boto3's standard configuration applies. S3 support is imported only when an
    `s3://` store is opened, so commands on a local store do not pay for loading boto3.
    """
    uri = uri or os.environ.get("ASSAY_STORE") or DEFAULT_STORE
    location = locate(uri, STORES, "an evidence store", paths=False)
    return location.scheme.open_store(location, s3_client)


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """Split `s3://bucket/some/prefix` into its bucket and key prefix.

    Returns:
        `(bucket, prefix)`; the prefix is `""` or ends with `/`, so `prefix + key` is a key.

    Raises:
        ValueError: not an `s3://` URI, no bucket, or an empty path segment (`a//b`), which
            S3-compatible servers that map keys to files refuse.
    """
    found = _SCHEME.match(uri)
    if found is None or found.group(1).lower() != S3Scheme.name:
        raise ValueError(f"not an S3 URI: {uri!r} (expected s3://BUCKET[/PREFIX])")
    from assay.s3 import bucket_and_prefix

    bucket, _, prefix = uri[found.end() :].partition("/")
    return bucket_and_prefix(bucket, prefix)


def object_reader() -> ObjectReader:
    """The reader of `s3://` inputs, one per process and S3 endpoint."""
    return _reader_at(os.environ.get("AWS_ENDPOINT_URL"))


@lru_cache(maxsize=4)
def _reader_at(endpoint: str | None) -> ObjectReader:
    from assay.s3 import ObjectReader, make_client

    return ObjectReader(make_client(endpoint_url=endpoint))


def not_a_file(path: Path) -> str | None:
    """What a path that is not a regular file or folder is, in words; None if nothing is there.

    A FIFO or device is refused without opening it (reading one would block or never end).
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop (the link resolves to itself), not a file"
        if path.is_symlink():
            return f"a broken symlink (to {os.readlink(path)}), not a file"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "permission denied"
        return None
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return f"{kind}, not a regular file"
    return None


def _named(suffixes: tuple[str, ...]) -> str:
    return " or ".join(suffixes)
