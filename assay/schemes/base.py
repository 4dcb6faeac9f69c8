"""What every location scheme is: the parsed `Location`, the `Scheme` interface a backend
implements, and the one error for a scheme that is not registered or not accepted."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from assay.errors import InputError

if TYPE_CHECKING:
    from assay.s3 import ObjectPin
    from assay.store.base import EvidenceStore


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
    """One kind of location: what may be kept and read there, how to open a store there, list
    its objects and read them. Everything Assay knows of a backend is in its `Scheme`."""

    name: ClassVar[str]
    form: ClassVar[str]
    """How a location of this scheme is written, for error messages."""
    holds_stores: ClassVar[bool] = False
    """Whether an evidence store can live there (`open_store`)."""
    shared: ClassVar[bool] = False
    """Whether a flow may read its inputs in another process (trials, records, signals,
    calibration sets): not data that exists only in the process that holds it."""
    remote: ClassVar[bool] = False
    """Whether a service may read it on a caller's say-so (`outputs_uri`): a service must not
    read its host's files, nor its own staging, because a caller named them."""
    environment: ClassVar[tuple[str, ...]] = ()
    """The environment variables its clients are configured by: a store or reader opened under
    other values is not reused (`assay.schemes.configuration`)."""

    def canonical(self, location: Location) -> str:
        """The URI that names this location from anywhere (what compares equal for the same
        place): the URI itself unless the scheme says otherwise."""
        return location.uri.rstrip("/")

    def open_store(self, location: Location, connection: Mapping[str, Any]) -> EvidenceStore:
        """The evidence store at a location (only schemes that `holds_stores`). `connection`:
        the saved settings that are set (an EvidenceStorage block's fields other than its URL),
        each scheme reading the ones it knows; empty: its standard configuration."""
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
        """Bytes [start, end) of an object (where objects can change under a name: the pinned
        one) and its pin."""


def named(suffixes: tuple[str, ...]) -> str:
    """File name endings in words, for errors."""
    return " or ".join(suffixes)
