"""The user's local copy of large validated suites: a re-run loads one without validating it.

A published suite is its canonical text in the evidence store; loading it validates that text
into models again in every process (`load_published`: about 10 µs a case, a tenth of a second
per 10,000 cases). A suite of at least `MIN_CASES` cases is therefore also kept, once
validated, as a pickle in the user's cache folder (`$XDG_CACHE_HOME/assay/suites`, else
`~/.cache/assay/suites`), named by its content address; loading that takes a third of the time.

Trust: nothing read from the evidence store (shared, e.g. S3) is ever unpickled — only these
files, which this user's processes wrote from a suite they had just validated. A file is read
only when it is a regular file this user owns that nobody else may read or write (0600, like an
SSH key), its name and header name this code (`code_fingerprint`: Python, pydantic and every
Assay source file) and the SHA-256 of its payload matches; the unpickler builds only Assay's own
pydantic models and enums (`_ModelsOnly`). Anything else is ignored and the suite is validated
from the store as before (and its copy written again). Writes are atomic (a temporary file in the
same folder, then a rename); at most `KEPT_FILES` copies are kept, the least recently used go.
"""

from __future__ import annotations

import contextlib
import enum
import hashlib
import io
import os
import pickle
import stat
import sys
import tempfile
from pathlib import Path

import pydantic
from pydantic import BaseModel

from assay.gcpause import kept_long
from assay.suites.suite import Suite

MIN_CASES = 2_000
"""Smaller suites validate in a few hundredths of a second: not worth a file."""
KEPT_FILES = 8
CACHE_DIR_ENV = "XDG_CACHE_HOME"
_MAGIC = b"assay-suite 1\n"
_SUFFIX = ".pickle"


def cache_dir() -> Path | None:
    """Where the copies are kept: `$XDG_CACHE_HOME/assay/suites`, else `~/.cache/assay/suites`;
    None for a user without a home (a container's arbitrary user id): then nothing is kept."""
    base = os.environ.get(CACHE_DIR_ENV)
    if not base:
        try:
            base = str(Path.home() / ".cache")
        except RuntimeError:
            return None
    return Path(base) / "assay" / "suites"


def code_fingerprint() -> str:
    """What a copy's objects depend on: the Python and pydantic versions and every Assay source
    file (a copy made by other code may hold models of another shape)."""
    import assay

    digest = hashlib.sha256(f"{sys.version}\0{pydantic.VERSION}\0".encode())
    package = Path(assay.__file__).parent
    for source in sorted(package.rglob("*.py")):
        digest.update(f"{source.relative_to(package)}\0".encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def _path(folder: Path, content_hash: str, fingerprint: str) -> Path:
    """One copy per suite and code version: trees of Assay side by side keep their own."""
    return folder / f"{content_hash.removeprefix('sha256:')}.{fingerprint[:16]}{_SUFFIX}"


class _ModelsOnly(pickle.Unpickler):
    """Builds nothing but Assay's pydantic models and enums (a suite's parts)."""

    def find_class(self, module: str, name: str) -> type:
        if module == "assay" or module.startswith("assay."):
            found = super().find_class(module, name)
            if isinstance(found, type) and issubclass(found, BaseModel | enum.Enum):
                return found
        raise pickle.UnpicklingError(f"a suite copy may not build {module}.{name}")


def _header(fingerprint: str, payload: bytes | memoryview) -> bytes:
    return _MAGIC + f"{fingerprint} {hashlib.sha256(payload).hexdigest()}\n".encode()


def cached_suite(content_hash: str) -> Suite | None:
    """The validated suite kept under `content_hash`, or None when there is no copy this user
    can trust (see the module's docstring)."""
    folder = cache_dir()
    if folder is None:
        return None
    fingerprint = code_fingerprint()
    path = _path(folder, content_hash, fingerprint)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as file:
        status = os.fstat(file.fileno())
        if (
            not stat.S_ISREG(status.st_mode)
            or status.st_uid != os.getuid()
            or status.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
        ):
            return None
        data = file.read()
    header_end = data.find(b"\n", len(_MAGIC)) + 1
    payload = memoryview(data)[header_end:]
    if not header_end or data[:header_end] != _header(fingerprint, payload):
        return None
    stream = io.BytesIO(data)
    stream.seek(header_end)
    try:
        with kept_long():  # as `load_published`: the suite lives on in the registry's cache
            suite = _ModelsOnly(stream).load()
    except Exception:  # any failure means: validate from the store instead
        return None
    if not isinstance(suite, Suite):
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: kept longest
    return suite


def keep_suite(content_hash: str, suite: Suite) -> None:
    """Keep a copy of `suite`, just validated from the text `content_hash` addresses. A copy
    that cannot be written (a read-only home, a full disk) is skipped: it only saves time."""
    folder = cache_dir()
    if folder is None:
        return
    fingerprint = code_fingerprint()
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        payload = pickle.dumps(suite, protocol=pickle.HIGHEST_PROTOCOL)
        descriptor, temporary = tempfile.mkstemp(dir=folder, suffix=".partial")  # mode 0600
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(_header(fingerprint, payload))
                file.write(payload)
            os.replace(temporary, _path(folder, content_hash, fingerprint))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _prune(folder)
    except (OSError, pickle.PicklingError):
        return


def _prune(folder: Path) -> None:
    copies = sorted(folder.glob("*" + _SUFFIX), key=lambda path: path.stat().st_mtime)
    for stale in copies[:-KEPT_FILES]:
        stale.unlink(missing_ok=True)
