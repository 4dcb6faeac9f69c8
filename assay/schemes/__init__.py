"""Where data lives, named by URI: the one registry of location schemes.

Every evidence store and every reader of user data (candidate outputs, release trials, outcome
records, session signals, calibration sets) names its location by URI, and this module alone
tells the schemes apart:

- `file` — a local file or folder: `file://PATH`, or a plain path;
- `s3` — an object or a key prefix of a bucket: `s3://BUCKET[/KEY-OR-PREFIX]`
  (`assay.schemes.s3`);
- `inline` — outputs staged in this process by the service (`inline://NAME/outputs.jsonl`, see
  `assay.staging`); they exist only while the request that sent them runs.

`locate` parses a URI into its `Scheme` and the rest; each scheme opens an evidence store (if one
can live there), lists the objects at a location and reads byte ranges of an object, and says
where it may be used (`holds_stores`, `shared`, `remote`). Adding a backend is one module with
its `Scheme` subclass and one entry in `SCHEMES` (docs/architecture.md, "How to add a storage
scheme"). A URI with any other `NAME://` is one `UnknownSchemeError`, never a local path that
happens not to exist.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from assay import staging
from assay.errors import InputError, shown
from assay.schemes.base import Location, Scheme, UnknownSchemeError, named
from assay.schemes.s3 import S3Scheme

if TYPE_CHECKING:
    from assay.s3 import ObjectPin
    from assay.store.base import EvidenceStore

DEFAULT_STORE: Final = "file://.assay"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


class FileScheme(Scheme):
    name = "file"
    form = "file://PATH"
    holds_stores = True
    shared = True

    def open_store(self, location: Location, connection: Mapping[str, Any]) -> EvidenceStore:
        from assay.store.file import FileStore

        return FileStore(location.rest)

    def canonical(self, location: Location) -> str:
        return f"{self.name}://{Path(location.rest).expanduser().resolve()}"

    def objects(self, location: Location, suffixes: tuple[str, ...], what: str) -> list[str]:
        path = Path(location.rest)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(suffixes))
            if not files:
                raise InputError(location.uri, f"the folder holds no {named(suffixes)} files")
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
"""The registry: a backend is one entry (a test may add one for its duration)."""


class SchemeNames(Collection[str]):
    """The names of the registered schemes that have a property, read from `SCHEMES` whenever
    used, so a scheme registered after import is among them."""

    def __init__(self, having: Callable[[Scheme], bool]) -> None:
        self._having = having

    def __iter__(self) -> Iterator[str]:
        return iter([name for name, scheme in SCHEMES.items() if self._having(scheme)])

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        scheme = SCHEMES.get(name) if isinstance(name, str) else None
        return scheme is not None and self._having(scheme)


STORES: Final = SchemeNames(lambda scheme: scheme.holds_stores)
"""The schemes an evidence store can live on."""
SHARED: Final = SchemeNames(lambda scheme: scheme.shared)
"""The schemes of inputs a flow may read in another process (trials, records, signals,
calibration sets): not `inline`, which exists only in the process that staged it."""
REMOTE: Final = SchemeNames(lambda scheme: scheme.remote)
"""The schemes a service reads on a caller's say-so (`outputs_uri`)."""


def is_inline(uri: str) -> bool:
    """Whether `uri` is an `inline://` reference (whether or not its entry still exists)."""
    found = _SCHEME.match(uri)
    return found is not None and found.group(1).lower() == InlineScheme.name


def locate(
    uri: str, accepted: Collection[str] = SCHEMES, what: str = "data", *, paths: bool = True
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
    """The objects behind a file, folder, key prefix (or staged reference), in order."""
    location = locate(uri, accepted, what)
    return location.scheme.objects(location, suffixes, what)


def one_object(uri: str, what: str, accepted: Collection[str] = SHARED) -> str:
    """The one object a file path or key names (a folder or prefix is refused)."""
    location = locate(uri, accepted, what)
    return location.scheme.one_object(location, what)


def read(
    name: str, start: int, end: int, pin: ObjectPin | None = None
) -> tuple[bytes, ObjectPin | None]:
    """Bytes [start, end) of the object `name` (as `objects` gave it) and its pin."""
    location = locate(name)
    return location.scheme.read(location, start, end, pin)


def open_store(
    uri: str | None = None, *, connection: Mapping[str, Any] | None = None
) -> EvidenceStore:
    """Open the evidence store named by `uri`, else `ASSAY_STORE`, else the local default.

    `connection`: saved settings of its scheme's client (an EvidenceStorage block's); without
    them the scheme's standard configuration applies. A scheme imports its client library only
    when its store is opened, so commands on a local store do not pay for loading it.
    """
    uri = uri or os.environ.get("ASSAY_STORE") or DEFAULT_STORE
    location = locate(uri, STORES, "an evidence store", paths=False)
    return location.scheme.open_store(location, connection or {})


def canonical_store(uri: str | None = None) -> str:
    """The evidence store `uri` names (else `ASSAY_STORE`, else the local default) as one URI
    whatever folder it is named from: two commands keep the same store when these are equal."""
    uri = uri or os.environ.get("ASSAY_STORE") or DEFAULT_STORE
    location = locate(uri, STORES, "an evidence store", paths=False)
    return location.scheme.canonical(location)


def configuration() -> tuple[str | None, ...]:
    """The environment every registered scheme's clients are configured by, as it is now: what
    a cache of open stores or readers is keyed by."""
    return tuple(os.environ.get(name) for scheme in SCHEMES.values() for name in scheme.environment)


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
