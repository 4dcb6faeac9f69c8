"""Cursor pagination for newest-first listings: `{"items": [...], "next_cursor": ...}`.

A cursor is the opaque, URL-safe encoding of the last item's sort key (time, id). The next page
holds the items strictly older than it, so records appended meanwhile never shift a page. A
listing in a fixed order that never grows (a completed run's cases) pages by position instead,
its cursor bound to the run and the filter it was given out for.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Generic, TypeVar

from pydantic import BaseModel

from assay.api.problems import Problem

Item = TypeVar("Item")
SortKey = tuple[str, str]

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


class Page(BaseModel, Generic[Item]):
    """One page of a listing; `next_cursor` is None on the last page."""

    items: list[Item]
    next_cursor: str | None


def sort_key(at: datetime, ident: str) -> SortKey:
    """The (time, id) key that orders a listing newest first."""
    return (at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), ident)


def _encode(key: SortKey) -> str:
    return base64.urlsafe_b64encode(json.dumps(list(key)).encode()).decode().rstrip("=")


def _decode(cursor: str) -> SortKey:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        at, ident = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise Problem(422, "cursor: not a cursor this service gave out", field="cursor") from None
    if not isinstance(at, str) or not isinstance(ident, str):
        raise Problem(422, "cursor: not a cursor this service gave out", field="cursor")
    return at, ident


def _scope_digest(scope: str) -> str:
    return hashlib.sha256(scope.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def encode_position(position: int, scope: str) -> str:
    """The cursor of a listing in a fixed order (a run's cases): the position to go on from,
    bound to its `scope` (the run and the filter it was given out for)."""
    return _encode((_scope_digest(scope), str(position)))


def decode_position(cursor: str | None, scope: str) -> int:
    """The position an `encode_position` cursor names; 0 without one. A cursor given out for
    another scope (another run, another filter) is refused: it would skip or repeat items."""
    if cursor is None:
        return 0
    bound, position = _decode(cursor)
    if not position.isdigit():
        raise Problem(422, "cursor: not a cursor this service gave out", field="cursor")
    if bound != _scope_digest(scope):
        raise Problem(
            422, "cursor: given out for another run or filter than this one", field="cursor"
        )
    return int(position)


def paginate(
    items: Sequence[Item], key: Callable[[Item], SortKey], limit: int, cursor: str | None
) -> Page[Item]:
    """The page after `cursor` of `items` ordered newest first by `key`."""
    ordered = sorted(items, key=key, reverse=True)
    if cursor is not None:
        after = _decode(cursor)
        ordered = [item for item in ordered if key(item) < after]
    page = ordered[:limit]
    more = len(ordered) > limit
    return Page[Item](items=list(page), next_cursor=_encode(key(page[-1])) if more else None)
