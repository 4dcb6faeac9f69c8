"""Hostile or meaningless suite files are refused at once, as one-line input errors.

An alias bomb, a 10,000-deep document, duplicate keys, NaN bounds and a BOM: each names the
file (and the line where it can), never runs for minutes, never ends in a traceback.
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.suites.suite import load_suite, parse_suite

CASE = "cases:\n  - id: c1\n    input: q\n    scorers:\n"


def _alias_bomb() -> str:
    """Nine levels of nine aliases each: 9**9 (387 million) strings once expanded."""
    levels = ["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
    for previous, name in zip(string.ascii_lowercase[:8], string.ascii_lowercase[1:9], strict=True):
        levels.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    value = "\n".join(f"            {level}" for level in levels)
    return f"suite: bomb\n{CASE}      - json_equal:\n          value:\n{value}\n"


def test_a_yaml_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    bomb = _alias_bomb()
    assert len(bomb.encode()) < 700
    path = tmp_path / "bomb.yaml"
    path.write_text(bomb)

    with pytest.raises(InputError) as caught:
        load_suite(path)

    assert "alias" in caught.value.problem
    assert caught.value.line is not None and caught.value.line > 5
    code, output = _cli("suite", "publish", str(path))
    assert code == 2 and len(output.strip().splitlines()) == 1 and "alias" in output


def test_shared_scorer_lists_by_alias_still_load() -> None:
    first = "  - id: c0\n    input: q\n    scorers: &checks\n      - contains: a\n      - regex: b"
    rest = "".join(f"  - id: c{n}\n    input: q\n    scorers: *checks\n" for n in range(1, 500))
    suite = parse_suite(f"suite: shared\ncases:\n{first}\n{rest}", "shared.yaml")
    assert len(suite.cases) == 500 and len(suite.cases[-1].scorers) == 2


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_a_10000_deep_suite_is_an_input_error_not_a_recursion_error(
    tmp_path: Path, suffix: str
) -> None:
    deep = "[" * 10_000 + "]" * 10_000
    text = (
        '{"suite": "deep", "cases": [{"id": "c1", "input": "q", '
        f'"scorers": [{{"json_equal": {{"value": {deep}}}}}]}}]}}'
    )
    path = tmp_path / f"deep{suffix}"
    path.write_text(text)

    with pytest.raises(InputError) as caught:
        load_suite(path)

    assert "nest" in caught.value.problem
    code, output = _cli("suite", "publish", str(path))
    assert code == 2 and len(output.strip().splitlines()) == 1


def test_a_json_equal_value_deeper_than_the_limit_is_refused(tmp_path: Path) -> None:
    deep = "[" * 200 + "]" * 200
    text = (
        '{"suite": "deep", "cases": [{"id": "c1", "input": "q", '
        f'"scorers": [{{"json_equal": {{"value": {deep}}}}}]}}]}}'
    )
    with pytest.raises(InputError) as caught:
        parse_suite(text, "deep.json")
    assert "nested more than 64 levels" in caught.value.problem


@pytest.mark.parametrize(
    ("text", "key", "line"),
    [
        (f"suite: first\nsuite: second\n{CASE}      - contains: a\n", "suite", 2),
        (f"suite: s\n{CASE}      - contains: a\n    scorers:\n      - contains: b\n", "scorers", 7),
    ],
    ids=["second suite", "second scorers"],
)
def test_a_duplicate_yaml_key_is_an_error_naming_the_key_and_line(
    text: str, key: str, line: int
) -> None:
    with pytest.raises(InputError) as caught:
        parse_suite(text, "dup.yaml")
    assert f"duplicate key '{key}'" in caught.value.problem
    assert caught.value.line == line


def test_a_duplicate_json_key_is_an_error_naming_the_key_and_line() -> None:
    text = (
        '{"suite": "s",\n "cases": [{"id": "c1", "input": "q",\n'
        '   "scorers": [{"contains": "a"}],\n   "scorers": []}]}\n'
    )
    with pytest.raises(InputError) as caught:
        parse_suite(text, "dup.json")
    assert "duplicate key 'scorers'" in caught.value.problem
    assert caught.value.line == 4


def test_a_merge_key_may_still_be_overridden() -> None:
    text = (
        "suite: merged\ncases:\n  - &first {id: c1, input: q, scorers: [{contains: a}]}\n"
        "  - <<: *first\n    id: c2\n"
    )
    suite = parse_suite(text, "merged.yaml")
    assert [case.id for case in suite.cases] == ["c1", "c2"]


@pytest.mark.parametrize(
    "scorer",
    ["numeric_range: {min: .nan}", "numeric_range: {max: .inf}", "json_equal: {value: .nan}"],
)
def test_a_bound_that_no_number_can_meet_is_refused(scorer: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_suite(f"suite: s\n{CASE}      - {scorer}\n", "nan.yaml")
    assert caught.value.line == 6


def test_a_nan_threshold_is_refused_as_not_finite() -> None:
    with pytest.raises(InputError) as caught:
        parse_suite(f"suite: s\npass_threshold: .nan\n{CASE}      - contains: a\n", "nan.yaml")
    assert "finite" in caught.value.problem
    assert caught.value.field == "pass_threshold"


def test_a_json_suite_with_a_bom_says_bom(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    suite = {"suite": "s", "cases": [{"id": "c1", "input": "q", "scorers": [{"contains": "a"}]}]}
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(suite).encode())
    with pytest.raises(InputError) as caught:
        load_suite(path)
    assert "BOM" in caught.value.problem


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output
