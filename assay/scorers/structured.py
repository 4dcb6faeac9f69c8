"""Structured-output scorers: json_valid and json_equal."""

from __future__ import annotations

import json
import math
from typing import Any, Final

from pydantic import field_validator

from assay.scorers._registry import PASS, Outcome, Scorer, ScorerConfig, clamp, fail, scorer


class JsonValidConfig(ScorerConfig):
    """`json_valid`: the output parses as JSON. Takes no options."""


class JsonEqualConfig(ScorerConfig):
    """`json_equal`: the output parses to JSON semantically equal to `value`.

    Always written in full form (`json_equal: {value: {...}}`), because a bare mapping would be
    ambiguous with the scorer's own options.
    """

    value: Any

    @field_validator("value")
    @classmethod
    def _meaningful(cls, value: Any) -> Any:
        _check_json_value(value)
        return value


MAX_VALUE_DEPTH: Final = 64
"""Nesting a `json_equal` value may have; deeper is refused (serialising it would overflow)."""


def _check_json_value(value: Any) -> None:
    """Refuse a value nested more than MAX_VALUE_DEPTH deep, or holding NaN or infinity (which
    no output can equal). Iterative, so a hostile value cannot overflow the stack here."""
    pending: list[tuple[Any, int]] = [(value, 1)]
    while pending:
        node, depth = pending.pop()
        if depth > MAX_VALUE_DEPTH:
            raise ValueError(f"json_equal value is nested more than {MAX_VALUE_DEPTH} levels")
        if isinstance(node, float) and not math.isfinite(node):
            raise ValueError(f"json_equal value holds {node}, which no JSON output can equal")
        if isinstance(node, dict):
            pending.extend((child, depth + 1) for child in node.values())
        elif isinstance(node, list):
            pending.extend((child, depth + 1) for child in node)


def json_equivalent(left: Any, right: Any) -> bool:
    """Semantic JSON equality: key order ignored, `true` never equals `1`, `1` equals `1.0`."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(
            json_equivalent(left[key], right[key]) for key in left
        )
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(
            json_equivalent(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and bool(left == right)


_NOT_JSON = fail("not valid JSON")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON (RFC 8259)")


def parse_json(output: str) -> tuple[bool, Any]:
    """Parse output as strict JSON (no NaN/Infinity); returns (ok, value)."""
    try:
        return True, json.loads(output, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False, None


@scorer("json_valid", JsonValidConfig)
def json_valid(config: JsonValidConfig) -> Scorer:
    """Pass when the output is valid JSON."""

    def check(output: str) -> Outcome:
        return PASS if parse_json(output)[0] else _NOT_JSON

    return Scorer("json_valid", "json_valid", check)


@scorer("json_equal", JsonEqualConfig)
def json_equal(config: JsonEqualConfig) -> Scorer:
    """Pass when the output's JSON equals the configured value, ignoring key order."""
    expected = config.value

    def check(output: str) -> Outcome:
        ok, actual = parse_json(output)
        if not ok:
            return _NOT_JSON
        return PASS if json_equivalent(actual, expected) else fail("differs")

    shown = json.dumps(expected, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return Scorer("json_equal", f"json_equal {clamp(shown, 60)}", check)
