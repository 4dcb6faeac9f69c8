"""The numeric_range scorer.

The number is the first number written in the output (thousands separators allowed:
`$1,234.50` reads as 1234.5), or, with `path`, the value at a dotted JSON path such as `amount`
or `items.0.price` (numeric strings such as `"12.50"` are accepted there too).
"""

from __future__ import annotations

import math
from typing import Any

import re2
from pydantic import Field, model_validator

from assay.scorers._registry import (
    PASS,
    Observation,
    Outcome,
    Scorer,
    ScorerConfig,
    fail,
    scorer,
)
from assay.scorers.structured import parse_json

_NUMBER = re2.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?")


class NumericRangeConfig(ScorerConfig):
    """`numeric_range`: min <= number <= max (inclusive; either bound may be omitted)."""

    min: float | None = Field(default=None, allow_inf_nan=False)
    max: float | None = Field(default=None, allow_inf_nan=False)
    path: str | None = None

    @model_validator(mode="after")
    def _bounds(self) -> NumericRangeConfig:
        if self.min is None and self.max is None:
            raise ValueError("numeric_range needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"numeric_range min {self.min} is greater than max {self.max}")
        if self.path is not None and (not self.path or any(not p for p in self.path.split("."))):
            raise ValueError(f"numeric_range path {self.path!r} has an empty segment")
        return self


def first_number(text: str) -> float | None:
    """The first number written in `text`, or None."""
    # Searched as UTF-8 bytes: RE2's wrapper maps offsets back to characters for a str, which
    # costs more than the match (the pattern is ASCII, so the bytes matched are the digits).
    match = _NUMBER.search(text.encode())
    return None if match is None else float(match.group(0).decode().replace(",", ""))


def value_at(document: Any, path: str) -> Any:
    """Walk a dotted path (`items.0.price`) through parsed JSON; raises LookupError if absent."""
    node = document
    for segment in path.split("."):
        if isinstance(node, dict):
            node = node[segment]
        elif isinstance(node, list) and segment.isdigit():
            node = node[int(segment)]
        else:
            raise LookupError(segment)
    return node


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value.replace(",", ""))
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _fmt(bound: float | None) -> str:
    if bound is None:
        return "…"
    return str(int(bound)) if bound.is_integer() else str(bound)


class _InRange:
    """The check of one `numeric_range` configuration.

    An object rather than closures: a suite whose cases each have their own bounds compiles one
    per case while it is scored (`assay.runs.scoring.CaseScorers`), and this is one object the
    cyclic collector tracks where the closures were about ten, each adding to its collections.
    """

    __slots__ = ("high", "low", "path")

    def __init__(self, config: NumericRangeConfig) -> None:
        self.low = -math.inf if config.min is None else config.min
        self.high = math.inf if config.max is None else config.max
        self.path = config.path

    def _read(self, output: str) -> float | Outcome:
        if self.path is None:
            number = first_number(output)
            return fail("no number") if number is None else number
        ok, document = parse_json(output)
        if not ok:
            return fail("not valid JSON")
        try:
            found = _as_number(value_at(document, self.path))
        except (LookupError, IndexError):
            return fail("path not found")
        return fail("not a number") if found is None else found

    def __call__(self, observed: Observation) -> Outcome:
        number = self._read(observed.text)
        if isinstance(number, Outcome):
            return number
        return PASS if self.low <= number <= self.high else fail("out of range")


@scorer("numeric_range", NumericRangeConfig)
def numeric_range(config: NumericRangeConfig) -> Scorer:
    """Pass when the number read from the output lies within [min, max]."""
    path = config.path
    where = f" at {path}" if path else ""
    label = f"numeric_range [{_fmt(config.min)}, {_fmt(config.max)}]{where}"
    return Scorer("numeric_range", label, observe=_InRange(config))
