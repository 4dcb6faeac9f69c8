"""Monitoring windows: the current window is [now − window, now), the previous one the same length
just before it.

A session belongs to the moment it ended (`ended_at`), or, while it has not ended, the moment it
started (`started_at`). A session with neither timestamp cannot be placed and is counted as
undated.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final

from pydantic import (
    AwareDatetime,
    BaseModel,
)

from assay.errors import InputError

_WINDOW = re.compile(r"^([1-9][0-9]{0,6})([mhd])$")

_WINDOW_UNITS: Final = {"m": "minutes", "h": "hours", "d": "days"}

MAX_WINDOW: Final = timedelta(days=3650)
"""Ten years: longer windows are surely a typo, and would leave the calendar's range."""


def parse_window(text: str) -> timedelta:
    """`30m`, `6h`, `24h`, `7d` → a duration of at most `MAX_WINDOW`; else an input error."""
    match = _WINDOW.match(text.strip())
    if match is None:
        raise InputError("--window", "use a whole number and a unit m, h or d (30m, 6h, 24h, 7d)")
    length = timedelta(**{_WINDOW_UNITS[match[2]]: int(match[1])})
    if length > MAX_WINDOW:
        raise InputError("--window", f"at most {MAX_WINDOW.days}d")
    return length


def parse_now(text: str | None) -> datetime:
    """An ISO 8601 instant (a time without an offset is read as UTC); None is the present."""
    if text is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError("--now", "not an ISO 8601 time (e.g. 2026-06-02T00:00:00Z)") from None
    return utc(moment)


def utc(moment: datetime) -> datetime:
    """The same instant in UTC; a time without an offset is read as UTC."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


class Window(BaseModel):
    """A half-open interval [start, end) of session times."""

    start: AwareDatetime
    end: AwareDatetime

    def holds(self, moment: datetime) -> bool:
        """Whether `moment` falls in [start, end)."""
        return self.start <= moment < self.end


def windows(window: str, now: datetime) -> tuple[Window, Window]:
    """The current window [now − window, now) and the previous one of the same length.

    Raises:
        InputError: a malformed or too long window, or a `now` so early that the previous
            window would start before the calendar does.
    """
    length = parse_window(window)
    end = utc(now)
    try:
        start = end - 2 * length
    except OverflowError:
        raise InputError("--now", f"too early for two {window} windows before it") from None
    return Window(start=start + length, end=end), Window(start=start, end=start + length)
