"""Candidate outputs: streaming index, slices, and input errors naming file and line (SPEC §4)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

import pytest

from assay.errors import InputError
from assay.outputs.index import index_outputs
from assay.outputs.slices import OutputsIndex, read_slice

CANARY = "CANARY-51d0e2-private-output"
IDS = [f"case-{n}" for n in range(1, 8)]


def line(case_id: str, output: str = "an answer", **extra: Any) -> str:
    return json.dumps({"case_id": case_id, "output": output, **extra})


def write_jsonl(path: Path, lines: Sequence[str | bytes]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    encoded = [item if isinstance(item, bytes) else item.encode("utf-8") for item in lines]
    path.write_bytes(b"\n".join(encoded) + b"\n")
    return path


def read_all(index: OutputsIndex, selected: Collection[str]) -> list[str]:
    return [record.case_id for piece in index.slices for record in read_slice(piece, selected)]


def index_error(path: Path, known: Collection[str] = IDS) -> InputError:
    with pytest.raises(InputError) as info:
        index_outputs(str(path), set(known), list(known), 10)
    return info.value


# --- indexing and slices --------------------------------------------------------------------


def test_single_file_is_indexed_and_read_back(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line(i, f"answer {i}") for i in IDS[:3]])
    index = index_outputs(str(path), set(IDS), IDS[:3], 10)
    assert index.seen == 3
    assert index.missing == []
    assert len(index.slices) == 1
    assert index.slices[0].cases == 3
    records = [r for piece in index.slices for r in read_slice(piece, set(IDS))]
    assert [(r.case_id, r.output) for r in records] == [(i, f"answer {i}") for i in IDS[:3]]


def test_file_uri_prefix_is_accepted(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1")])
    index = index_outputs(f"file://{path}", set(IDS), ["case-1"], 10)
    assert index.seen == 1


def test_optional_fields_are_parsed(tmp_path: Path) -> None:
    text = line(
        "case-1",
        duration_ms=1200,
        usage={"input_tokens": 10, "output_tokens": 20, "cost_usd": 0.5},
        guardrail_triggers=2,
        unrelated="ignored",
    )
    path = write_jsonl(tmp_path / "out.jsonl", [text])
    index = index_outputs(str(path), set(IDS), ["case-1"], 10)
    (record,) = list(read_slice(index.slices[0], {"case-1"}))
    assert record.duration_ms == 1200
    assert record.usage is not None
    assert record.usage.output_tokens == 20
    assert record.usage.cost_usd == 0.5
    assert record.guardrail_triggers == 2


@pytest.mark.parametrize(
    ("count", "chunk_size", "sizes"),
    [(7, 3, [3, 3, 1]), (6, 3, [3, 3]), (7, 1, [1] * 7), (7, 100, [7]), (2, 2, [2])],
)
def test_slices_respect_chunk_size(
    tmp_path: Path, count: int, chunk_size: int, sizes: list[int]
) -> None:
    selected = IDS[:count]
    path = write_jsonl(tmp_path / "out.jsonl", [line(i) for i in selected])
    index = index_outputs(str(path), set(IDS), selected, chunk_size)
    assert [piece.cases for piece in index.slices] == sizes
    assert read_all(index, set(selected)) == selected


def test_each_slice_reads_back_exactly_its_own_cases(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line(i) for i in IDS])
    index = index_outputs(str(path), set(IDS), IDS, 3)
    per_slice = [[r.case_id for r in read_slice(piece, set(IDS))] for piece in index.slices]
    assert per_slice == [IDS[0:3], IDS[3:6], IDS[6:7]]


def test_folder_of_jsonl_files_is_indexed_every_output_once(tmp_path: Path) -> None:
    folder = tmp_path / "drop"
    write_jsonl(folder / "a.jsonl", [line("case-1"), line("case-2"), line("case-3")])
    write_jsonl(folder / "b.jsonl", [line("case-4"), line("case-5")])
    write_jsonl(folder / "nested" / "c.jsonl", [line("case-6")])
    (folder / "notes.txt").write_text("not an outputs file {")
    index = index_outputs(str(folder), set(IDS), IDS, 2)
    assert index.seen == 6
    assert index.missing == ["case-7"]
    counts = Counter(read_all(index, set(IDS)))
    assert counts == Counter(IDS[:6])
    # slices never span two files
    assert [(Path(p.path).name, p.cases) for p in index.slices] == [
        ("a.jsonl", 2),
        ("a.jsonl", 1),
        ("b.jsonl", 2),
        ("c.jsonl", 1),
    ]


def test_folder_without_jsonl_files_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("nothing")
    with pytest.raises(InputError, match=r"no \.jsonl (or \.json )?(or \.pb .*)?files"):
        index_outputs(str(tmp_path), set(IDS), IDS, 10)


def test_missing_outputs_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such outputs file"):
        index_outputs(str(tmp_path / "absent.jsonl"), set(IDS), IDS, 10)


def test_blank_lines_are_ignored(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "out.jsonl", ["", line("case-1"), "   ", "", line("case-2"), "\t", ""]
    )
    index = index_outputs(str(path), set(IDS), ["case-1", "case-2"], 10)
    assert index.seen == 2
    assert read_all(index, {"case-1", "case-2"}) == ["case-1", "case-2"]


def test_crlf_line_endings_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_bytes((line("case-1") + "\r\n" + line("case-2") + "\r\n").encode())
    index = index_outputs(str(path), set(IDS), ["case-1", "case-2"], 1)
    assert read_all(index, {"case-1", "case-2"}) == ["case-1", "case-2"]


def test_missing_lists_selected_case_ids_without_output_in_given_order(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-2"), line("case-5")])
    selected = ["case-7", "case-2", "case-1", "case-5", "case-3"]
    index = index_outputs(str(path), set(IDS), selected, 10)
    assert index.missing == ["case-7", "case-1", "case-3"]


def test_missing_ignores_unselected_cases(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1")])
    index = index_outputs(str(path), set(IDS), ["case-1", "case-2"], 10)
    assert index.missing == ["case-2"]


# --- sampling: unselected outputs are validated but not read ----------------------------------


def test_selected_subset_skips_unselected_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line(i) for i in IDS])
    selected = ["case-2", "case-5", "case-6"]
    index = index_outputs(str(path), set(IDS), selected, 2)
    assert index.seen == 7  # every line is validated
    assert [piece.cases for piece in index.slices] == [2, 1]
    assert read_all(index, set(selected)) == selected


def test_unselected_lines_are_still_validated(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1"), '{"case_id": "case-2"}'])
    with pytest.raises(InputError) as info:
        index_outputs(str(path), set(IDS), ["case-1"], 10)
    assert info.value.line == 2


# --- input errors name file and line, never the output ------------------------------------


def assert_names_file_and_line(error: InputError, path: Path, expected_line: int) -> None:
    assert error.line == expected_line
    assert error.source == str(path)
    assert f"{path.name} line {expected_line}" in str(error)
    assert CANARY not in str(error)
    assert CANARY not in repr(error.args)


def test_malformed_json_line(tmp_path: Path) -> None:
    lines = [line("case-1"), line("case-2"), '{"case_id": "case-3", "output": "' + CANARY]
    path = write_jsonl(tmp_path / "out.jsonl", lines)
    error = index_error(path)
    assert_names_file_and_line(error, path, 3)
    assert "malformed JSON" in str(error)


def test_malformed_line_after_blank_lines_counts_physical_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1"), "", "", "{" + CANARY])
    assert_names_file_and_line(index_error(path), path, 4)


def test_trailing_garbage_after_object_is_malformed(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1", CANARY) + " trailing"])
    error = index_error(path)
    assert_names_file_and_line(error, path, 1)
    assert "malformed JSON" in str(error)


@pytest.mark.parametrize("text", [f'["case-1", "{CANARY}"]', f'"{CANARY}"', "42", "null"])
def test_line_that_is_not_an_object(tmp_path: Path, text: str) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1"), text])
    error = index_error(path)
    assert_names_file_and_line(error, path, 2)
    assert "must be a JSON object" in str(error)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        ({"case_id": "case-1"}, "output"),
        ({"output": CANARY}, "case_id"),
        ({"case_id": "case-1", "output": 5}, "output"),
        ({"case_id": "case-1", "output": [CANARY]}, "output"),
        ({"case_id": "case-1", "output": None}, "output"),
        ({"case_id": 7, "output": CANARY}, "case_id"),
        ({"case_id": "", "output": CANARY}, "case_id"),
        ({"case_id": "case-1", "output": CANARY, "duration_ms": -1}, "duration_ms"),
        (
            {"case_id": "case-1", "output": CANARY, "usage": {"input_tokens": "x"}},
            "usage.input_tokens",
        ),
    ],
)
def test_invalid_field_names_the_field(tmp_path: Path, record: dict[str, Any], field: str) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-2"), json.dumps(record)])
    error = index_error(path)
    assert_names_file_and_line(error, path, 2)
    assert error.field == field
    assert f"field {field}" in str(error)


def test_unknown_case_id(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1"), line("stranger", CANARY)])
    error = index_error(path)
    assert_names_file_and_line(error, path, 2)
    assert "unknown case id 'stranger'" in str(error)


def test_duplicate_case_id_in_one_file(tmp_path: Path) -> None:
    lines = [line("case-1"), line("case-2"), line("case-3"), line("case-2", CANARY)]
    path = write_jsonl(tmp_path / "out.jsonl", lines)
    error = index_error(path)
    assert_names_file_and_line(error, path, 4)
    assert "duplicate output for case 'case-2'" in str(error)
    assert "line 2" in error.problem  # points at the first occurrence


def test_duplicate_case_id_across_two_files_in_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "drop"
    first = write_jsonl(folder / "a.jsonl", [line("case-1"), line("case-2")])
    second = write_jsonl(folder / "b.jsonl", [line("case-3"), line("case-1", CANARY)])
    with pytest.raises(InputError) as info:
        index_outputs(str(folder), set(IDS), IDS, 10)
    error = info.value
    assert_names_file_and_line(error, second, 2)
    assert f"{first} line 1" in error.problem


def test_duplicate_of_an_unselected_case_is_still_an_error(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-4"), line("case-4")])
    with pytest.raises(InputError) as info:
        index_outputs(str(path), set(IDS), ["case-1"], 10)
    assert info.value.line == 2


def test_non_utf8_line(tmp_path: Path) -> None:
    bad = b'{"case_id": "case-2", "output": "\xff\xfe' + CANARY.encode() + b'"}'
    path = write_jsonl(tmp_path / "out.jsonl", [line("case-1"), bad, line("case-3")])
    error = index_error(path)
    assert_names_file_and_line(error, path, 2)
    assert "not UTF-8" in str(error)


# --- scale ----------------------------------------------------------------------------------


def test_fifty_thousand_lines_index_and_stream_quickly(tmp_path: Path) -> None:
    count = 50_000
    ids = [f"c{n}" for n in range(count)]
    path = tmp_path / "big.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for case_id in ids:
            handle.write(line(case_id, "a typical answer of moderate length") + "\n")
    known = set(ids)
    started = time.perf_counter()
    index = index_outputs(str(path), known, ids, 1000)
    read = sum(1 for piece in index.slices for _ in read_slice(piece, known))
    elapsed = time.perf_counter() - started
    assert index.seen == count
    assert index.missing == []
    assert len(index.slices) == 50
    assert all(piece.cases == 1000 for piece in index.slices)
    assert read == count
    assert elapsed < 3.0
