"""The JSON and JSON Lines reading the transcript readers (`atif`, `claude_code`, `codex`) share:
a head's leading members for detection, lines parsed into objects, timestamps, content text, and
the record each ends in.

Errors are one-line `InputError`s that name the line and the field, never a value.
"""

from __future__ import annotations

import json
from collections.abc import Container, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from assay.errors import InputError
from assay.intake.record import AgentRecord, Evidence, Exchange, Turn, UsageFigures
from assay.jsonl import numbered_lines
from assay.trajectory import ToolCall, Trajectory

CUT: Final = object()
"""A member whose value the head cut off."""

_DECODER: Final = json.JSONDecoder()


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def leading_members(text: str) -> dict[str, Any]:
    """The top-level members of the JSON object `text` begins, as far as `text` goes (a member
    whose value is cut off maps to `CUT`); {} when `text` does not begin an object."""
    members: dict[str, Any] = {}
    at = _skip_space(text, 0)
    if not text.startswith("{", at):
        return members
    at += 1
    while True:
        at = _skip_space(text, at)
        if not text.startswith('"', at):
            return members
        try:
            key, at = _DECODER.raw_decode(text, at)
        except ValueError:
            return members
        at = _skip_space(text, at)
        if not text.startswith(":", at):
            return members
        at = _skip_space(text, at + 1)
        try:
            members[key], at = _DECODER.raw_decode(text, at)
        except ValueError:
            members[key] = CUT
            return members
        at = _skip_space(text, at)
        if not text.startswith(",", at):
            return members
        at += 1


def reject_constant(name: str) -> Any:
    """`parse_constant` for `json.loads`: NaN and Infinity are not JSON."""
    raise ValueError(name)


def json_lines(raw: bytes, source: str) -> list[tuple[int, dict[str, Any]]]:
    """Each non-blank line of a JSON Lines file as (line number, object).

    Raises:
        InputError: not UTF-8, or a line that is malformed JSON or not an object (naming it).
    """
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(source, "not UTF-8 text") from None
    lines = []
    for number, _, _, line in numbered_lines([raw.removeprefix(b"\xef\xbb\xbf")]):
        try:
            value = json.loads(line, parse_constant=reject_constant)
        except (ValueError, RecursionError):
            raise InputError(source, "malformed JSON", line=number) from None
        if not isinstance(value, dict):
            raise InputError(source, "each line must be a JSON object", line=number)
        lines.append((number, value))
    return lines


def timestamp(value: Any, source: str, field: str, line: int | None = None) -> datetime | None:
    """An ISO 8601 timestamp (`Z` read as UTC, no offset as UTC); None for None.

    Raises:
        InputError: anything else, naming `field` (and `line`).
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    raise InputError(source, "must be an ISO 8601 timestamp", line=line, field=field)


def content_text(content: Any, part_types: Container[str] = ("text",)) -> str:
    """A message's or tool output's text: the string itself, or the `text` of its parts whose
    `type` is one of `part_types`, joined; "" for anything else."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict)
            and part.get("type") in part_types
            and isinstance(part.get("text"), str)
        )
    return ""


def transcript_record(
    source: str,
    steps: Sequence[tuple[ToolCall, ...]],
    turns: Sequence[Turn],
    text: str | None,
    usage: UsageFigures,
    moments: list[datetime],
    unseen: Mapping[Evidence, str],
    exchanges: tuple[Exchange, ...],
    *,
    no_usage: str,
    no_text: str,
) -> AgentRecord:
    """One transcript's record. `unseen` holds what the format itself cannot show; usage that is
    not known and a missing text join it with the reasons `no_usage` and `no_text`. The duration
    runs from the first to the last of `moments` (None for fewer than two). `exchanges` are its
    turns: a user message begins one, tool results never do (`assay.intake.exchanges`)."""
    gaps = dict(unseen)
    if not usage.known:
        gaps[Evidence.USAGE] = no_usage
    if text is None:
        gaps[Evidence.TEXT] = no_text
    duration = (max(moments) - min(moments)).total_seconds() * 1000 if len(moments) > 1 else None
    return AgentRecord(
        source=source,
        text=text,
        trajectory=Trajectory(tuple(steps)),
        unseen=gaps,
        turns=tuple(turns),
        exchanges=exchanges,
        usage=usage,
        duration_ms=duration,
    )
