"""Structured-output scorers: json_valid and json_equal."""

from __future__ import annotations

import json
from typing import Any

from assay.scorers._registry import PASS, Outcome, Scorer, ScorerConfig, clamp, fail, scorer


class JsonValidConfig(ScorerConfig):
    """`json_valid`: the output parses as JSON. Takes no options."""


class JsonEqualConfig(ScorerConfig):
    """`json_equal`: the output parses to JSON semantically equal to `value`.

    Always written in full form (`json_equal: {value: {...}}`), because a bare mapping would be
    ambiguous with the scorer's own options.
    """

    value: Any


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
