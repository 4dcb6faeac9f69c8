"""Outputs files whose identifiers or values are hostile or meaningless are refused clearly.

Identifiers are clamped and escaped in every message (a 10,000-character case id makes a short
one-line error); infinity, NaN and a UTF-8 BOM are named as what they are; a symlink loop or a
FIFO given as the outputs path is said to be one (and the FIFO is never opened).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from assay.errors import InputError, shown
from assay.outputs.index import index_outputs

KNOWN = {"c1", "c2"}


def _index(path: Path) -> None:
    index_outputs(str(path), KNOWN, ["c1", "c2"], chunk_size=10)


def _refusal(tmp_path: Path, *lines: str | bytes) -> InputError:
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines))
    with pytest.raises(InputError) as caught:
        _index(path)
    return caught.value


def test_a_10000_character_unknown_case_id_is_clamped_in_the_message(tmp_path: Path) -> None:
    hostile = "x" * 10_000
    error = _refusal(tmp_path, json.dumps({"case_id": hostile, "output": "o"}))
    assert len(str(error)) < 250 + len(str(tmp_path))
    assert "(10,000 characters)" in str(error)
    assert (error.line, error.field) == (1, "case_id")


def test_a_duplicate_case_id_with_newlines_stays_on_one_line(tmp_path: Path) -> None:
    known = "c1"
    row = json.dumps({"case_id": known, "output": "o"})
    error = _refusal(tmp_path, row, row)
    assert "duplicate output for case 'c1'" in str(error)
    newline_id = "evil\n" * 40
    error = _refusal(tmp_path, json.dumps({"case_id": newline_id, "output": "o"}))
    assert "\n" not in str(error) and "\\n" in str(error)
    assert "(200 characters)" in str(error)


def test_shown_escapes_and_clamps_to_80_characters() -> None:
    assert shown("c1") == "'c1'"
    assert shown("a" * 80) == repr("a" * 80)
    assert shown("a" * 81) == "'" + "a" * 80 + "…' (81 characters)"
    assert shown("tab\there") == "'tab\\there'"


@pytest.mark.parametrize(
    "line",
    [
        '{"case_id": "c1", "output": "o", "duration_ms": 1e400}',
        '{"case_id": "c1", "output": "o", "duration_ms": NaN}',
        '{"case_id": "c1", "output": "o", "usage": {"cost_usd": Infinity}}',
    ],
    ids=["1e400", "NaN", "Infinity"],
)
def test_infinite_or_nan_numbers_are_refused_as_not_finite(tmp_path: Path, line: str) -> None:
    error = _refusal(tmp_path, line)
    assert "finite" in error.problem, error
    assert "greater than or equal" not in error.problem


def test_a_bom_is_named(tmp_path: Path) -> None:
    error = _refusal(
        tmp_path, b"\xef\xbb\xbf" + json.dumps({"case_id": "c1", "output": "o"}).encode()
    )
    assert "BOM" in error.problem and error.line == 1


def test_a_symlink_loop_is_named_not_reported_missing(tmp_path: Path) -> None:
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)
    with pytest.raises(InputError) as caught:
        _index(loop)
    assert "symlink loop" in caught.value.problem


def test_a_broken_symlink_is_named(tmp_path: Path) -> None:
    link = tmp_path / "gone.jsonl"
    link.symlink_to(tmp_path / "nowhere.jsonl")
    with pytest.raises(InputError) as caught:
        _index(link)
    assert "broken symlink" in caught.value.problem


def test_a_fifo_is_named_and_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # opening it for reading would block this test for ever
    with pytest.raises(InputError) as caught:
        _index(fifo)
    assert "FIFO" in caught.value.problem
