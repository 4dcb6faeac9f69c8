"""JSON Lines records (outputs, trials, outcome records, session signals, calibration items).

One place for how a record file is cut into numbered lines and how a bad line is reported: the
file, the line and the field — never the line's content, which may be candidate output text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Final, TypeVar

from pydantic import BaseModel, ValidationError

from assay.errors import InputError, shown

Record = TypeVar("Record", bound=BaseModel)

_FIELD_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.\[\]]{0,63}")
"""A field name shown in an error; anything else (a key could itself be text) is not echoed."""


def numbered_lines(blocks: Iterable[bytes]) -> Iterator[tuple[int, int, int, bytes]]:
    """(line number, start offset, end offset, stripped line) for each non-blank line."""
    number, offset, pending = 0, 0, b""
    for block in blocks:
        lines = (pending + block).split(b"\n")
        pending = lines.pop()
        for line in lines:
            number += 1
            start, offset = offset, offset + len(line) + 1
            stripped = line.strip()
            if stripped:
                yield number, start, offset, stripped
    if pending.strip():
        yield number + 1, offset, offset + len(pending), pending.strip()


def parse_record(
    model: type[Record],
    raw: bytes | str,
    source: str,
    line: int,
    *,
    unknown_field: str = "unknown field",
) -> Record:
    """Validate one JSONL line as `model`; a problem raises InputError naming source and line.

    An unknown field (for models that forbid extras) is reported first, whatever else is wrong:
    it is the one that could carry text. Its name is shown only when it looks like a field name.

    Args:
        model: The record's pydantic model.
        raw: The line.
        source: File or object name, for the error.
        line: 1-based line number, for the error.
        unknown_field: The problem stated for an unknown field.
    """
    if isinstance(raw, bytes):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InputError(source, "not UTF-8 text", line=line) from None
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False, include_context=False)
        extra = [e for e in errors if e["type"] == "extra_forbidden"]
        first = (extra or errors)[0]
        field = ".".join(str(step) for step in first["loc"]) or None
        if first["type"] == "json_invalid":
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            bom = text.startswith("\ufeff")
            problem = "starts with a UTF-8 BOM; save the file as UTF-8 without BOM" if bom else ""
            raise InputError(source, problem or "malformed JSON", line=line) from None
        if first["type"] == "model_type" and not first["loc"]:
            raise InputError(source, "each line must be a JSON object", line=line) from None
        if extra:
            named = field if field and _FIELD_NAME.fullmatch(field) else "(unexpected field)"
            raise InputError(source, unknown_field, line=line, field=named) from None
        problem = first["msg"].removeprefix("Value error, ")
        raise InputError(source, problem, line=line, field=field) from None


class FirstLines:
    """The line each record id was first seen on, so that a repeated id is an input error
    naming both lines: `duplicate trial id 't0' (first at line 1)`."""

    def __init__(self, source: str, what: str, field: str) -> None:
        self._source, self._what, self._field = source, what, field
        self._first: dict[str, int] = {}

    def claim(self, record_id: str, line: int) -> None:
        """Note `record_id` on `line`; raise InputError when an earlier line already had it."""
        first = self._first.setdefault(record_id, line)
        if first != line:
            raise InputError(
                self._source,
                f"duplicate {self._what} {shown(record_id)} (first at line {first})",
                line=line,
                field=self._field,
            )
