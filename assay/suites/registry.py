"""The suite registry: content-addressed, append-only suite versions in the evidence store.

Layout:
    suites/<name>/content/<sha256>.json    canonical suite document (content-addressed)
    suites/<name>/versions/<000001>.json   SuiteVersion record (write-once)
    suite-files/<sha256>.json              PublishedFile: what a suite file's bytes published as
                                           (write-once; keyed by the SHA-256 of the file's bytes)

Publishing content identical to the latest version is a no-op that reports that version; any
change becomes version N+1. Versions are never edited, so any past run's data set can be rebuilt.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from datetime import UTC, datetime
from pathlib import Path
from threading import Lock

from pydantic import BaseModel

from assay.documents import read_text
from assay.errors import EvidenceConflictError, InputError, NotFoundError, shown
from assay.process_state import remembered
from assay.store import EvidenceStore
from assay.suites import local_cache
from assay.suites.suite import (
    MAX_NAME_CHARS,
    SUITE_SUFFIXES,
    Suite,
    load_published,
    parse_suite,
)

_REF = re.compile(r"^(?P<name>[a-z0-9][a-z0-9-]*)(?:@(?P<version>\d+))?$")
_CACHE_SIZE = 4


class SuiteVersion(BaseModel):
    """One published version of a suite."""

    suite: str
    version: int
    content_hash: str
    published_at: datetime
    cases: int
    case_hashes: dict[str, str]
    """Content address of every case, by case id: what changed between versions is a diff."""

    @property
    def ref(self) -> str:
        """`name@version`, the exact reference a run records."""
        return f"{self.suite}@{self.version}"


def _version_key(name: str, version: int) -> str:
    return f"suites/{name}/versions/{version:06d}.json"


def _content_key(name: str, digest: str) -> str:
    return f"suites/{name}/content/{digest.removeprefix('sha256:')}.json"


class PublishedFile(BaseModel):
    """What a suite file's bytes validated to when they were published: a pure function of the
    bytes, so it is written once and never changes. It lets a re-run of the same file skip
    parsing, validating and canonicalising it (a 100,000-case file: about a third of the run's
    CPU) — once its content is still the suite's latest version (`_published_file`)."""

    suite: str
    content_hash: str


def _file_key(file_digest: str) -> str:
    return f"suite-files/{file_digest}.json"


class _SuiteCache:
    """Validated suites by content hash: versions are immutable, so a cached one is never stale."""

    def __init__(self) -> None:
        self._items: OrderedDict[tuple[str, str], Suite] = OrderedDict()
        self._lock = Lock()

    def get(self, store: EvidenceStore, digest: str) -> Suite | None:
        with self._lock:
            suite = self._items.get((store.uri, digest))
            if suite is not None:
                self._items.move_to_end((store.uri, digest))
            return suite

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def put(self, store: EvidenceStore, digest: str, suite: Suite) -> None:
        with self._lock:
            self._items[(store.uri, digest)] = suite
            while len(self._items) > _CACHE_SIZE:
                self._items.popitem(last=False)


_cache = _SuiteCache()
_pinned: OrderedDict[tuple[str, str, int], SuiteVersion] = OrderedDict()
"""Version records by store and `name@version`: written once, so a run that names its version
(the launcher hands the flow `name@N`) resolves it from the store once per process."""
_PINNED_SIZE = 64
_pinned_lock = Lock()
remembered(__name__, "_cache", _cache.clear)
remembered(__name__, "_pinned", _pinned.clear, _pinned_lock)


def _version(store: EvidenceStore, name: str, number: int) -> SuiteVersion:
    key = (store.uri, name, number)
    with _pinned_lock:
        known = _pinned.get(key)
    if known is not None:
        return known
    try:
        record = SuiteVersion.model_validate_json(store.get(_version_key(name, number)))
    except NotFoundError:
        raise NotFoundError(f"suite {name}@{number} does not exist in {store.uri}") from None
    with _pinned_lock:
        _pinned[key] = record
        while len(_pinned) > _PINNED_SIZE:
            _pinned.popitem(last=False)
    return record


def versions(store: EvidenceStore, name: str) -> list[SuiteVersion]:
    """Every published version of `name`, oldest first."""
    return [
        SuiteVersion.model_validate_json(store.get(key))
        for key in store.list(f"suites/{name}/versions/")
    ]


def latest_version(store: EvidenceStore, name: str) -> SuiteVersion | None:
    """The newest version of `name`, or None if it was never published."""
    keys = list(store.list(f"suites/{name}/versions/"))
    return SuiteVersion.model_validate_json(store.get(keys[-1])) if keys else None


def publish(store: EvidenceStore, suite: Suite) -> tuple[SuiteVersion, bool]:
    """Publish `suite`; returns (version, created). Identical content reports the latest version."""
    canonical = suite.canonical
    store.put_once(_content_key(suite.suite, canonical.content_hash), canonical.text.encode())
    _cache.put(store, canonical.content_hash, suite)
    while True:
        latest = latest_version(store, suite.suite)
        if latest is not None and latest.content_hash == suite.content_hash:
            return latest, False
        record = SuiteVersion(
            suite=suite.suite,
            version=1 if latest is None else latest.version + 1,
            content_hash=suite.content_hash,
            published_at=datetime.now(UTC),
            cases=len(suite.cases),
            case_hashes=canonical.case_hashes,
        )
        try:
            store.put_once(
                _version_key(suite.suite, record.version), record.model_dump_json().encode()
            )
        except EvidenceConflictError:
            continue  # another publisher took this number first: look again
        return record, True


def parse_ref(ref: str) -> tuple[str, int | None]:
    """Split `name[@version]`; raises InputError on anything else."""
    match = _REF.match(ref)
    if match is None:
        raise InputError(shown(ref), "a suite reference is NAME or NAME@VERSION (e.g. refunds@3)")
    if len(match.group("name")) > MAX_NAME_CHARS:
        raise InputError(shown(ref), f"suite names are at most {MAX_NAME_CHARS} characters")
    version = match.group("version")
    return match.group("name"), None if version is None else int(version)


def resolve_version(store: EvidenceStore, ref: str) -> SuiteVersion:
    """The published version `name[@version]` names (latest when no version is given), without
    loading its cases."""
    name, number = parse_ref(ref)
    if number is None:
        record = latest_version(store, name)
        if record is None:
            raise NotFoundError(f"suite {name!r} was never published in {store.uri}")
        return record
    return _version(store, name, number)


def resolve(store: EvidenceStore, ref: str) -> tuple[SuiteVersion, Suite]:
    """Load a published suite by `name[@version]` (latest when no version is given)."""
    record = resolve_version(store, ref)
    return record, _load(store, record)


def _load(store: EvidenceStore, record: SuiteVersion) -> Suite:
    """The suite a version record names: from this process's cache, the user's local copy of a
    large suite (`local_cache`), or its stored content (then kept in both)."""
    suite = _cache.get(store, record.content_hash)
    if suite is not None:
        return suite
    kept = record.cases >= local_cache.MIN_CASES
    suite = local_cache.cached_suite(record.content_hash) if kept else None
    if suite is None:
        key = _content_key(record.suite, record.content_hash)
        suite = load_published(store.get(key), record.content_hash, f"{store.uri}/{key}")
        if kept:
            local_cache.keep_suite(record.content_hash, suite)
    _cache.put(store, record.content_hash, suite)
    return suite


def publish_or_resolve(store: EvidenceStore, suite: str) -> tuple[SuiteVersion, Suite]:
    """A suite file → published first (a no-op when identical to the latest version); a
    `NAME[@VERSION]` → that published version. Something that can only be a path (a folder
    separator or a suite file suffix) and names no file is reported as a missing file."""
    path = Path(suite)
    if _is_file(path):
        return _publish_file(store, path)
    refuse_missing_file(suite)
    return resolve(store, suite)


def refuse_missing_file(suite: str) -> None:
    """InputError when `suite`, which names no file, can only be a path (a folder separator or
    a suite file suffix) rather than a `NAME[@VERSION]`: a missing file, said as one."""
    if "/" in suite or "\\" in suite or Path(suite).suffix.lower() in SUITE_SUFFIXES:
        raise InputError(suite, "no such suite file")


def _publish_file(store: EvidenceStore, path: Path) -> tuple[SuiteVersion, Suite]:
    """A suite file published (a no-op when identical to the latest version). Bytes published
    before are recognised by their digest and resolved without being parsed again."""
    text = read_text(path)
    file_digest = hashlib.sha256(text.encode()).hexdigest()  # UTF-8 round-trips: the file's bytes
    known = _published_file(store, file_digest)
    if known is not None:
        return known, _load(store, known)
    loaded = parse_suite(text, str(path))
    version, _ = publish(store, loaded)
    published = PublishedFile(suite=loaded.suite, content_hash=loaded.content_hash)
    store.put_once_if_absent(_file_key(file_digest), published.model_dump_json().encode())
    return version, loaded


def _published_file(store: EvidenceStore, file_digest: str) -> SuiteVersion | None:
    """The latest version of the suite these file bytes published, if its content is still
    theirs; None when the bytes were never published, or when the suite has changed since (the
    file then publishes again, as `publish` would: a new version, even of older content)."""
    try:
        published = PublishedFile.model_validate_json(store.get(_file_key(file_digest)))
    except NotFoundError:
        return None
    latest = latest_version(store, published.suite)
    if latest is None or latest.content_hash != published.content_hash:
        return None
    return latest


def _is_file(path: Path) -> bool:
    """Whether `path` is a file; False for a name the file system refuses (too long, say),
    which then reads as a suite reference and is judged by that rule."""
    try:
        return path.is_file()
    except OSError:
        return False


def suite_names(store: EvidenceStore) -> list[str]:
    """Names of every published suite."""
    return sorted({key.split("/")[1] for key in store.list("suites/")})
