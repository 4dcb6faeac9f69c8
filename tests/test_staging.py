"""The in-process staging area that carries inline outputs to a flow by reference."""

from __future__ import annotations

import pytest

from assay import staging
from assay.errors import InputError
from assay.outputs.index import index_outputs
from assay.outputs.slices import read_slice
from assay.outputs.sources import output_sources

LINES = b'{"case_id": "a", "output": "first"}\n{"case_id": "b", "output": "second"}'


def test_staged_outputs_read_like_a_file_while_the_block_runs() -> None:
    before = staging.entries()
    with staging.staged(LINES) as reference:
        assert reference.startswith("inline://") and reference.endswith("/outputs.jsonl")
        assert staging.entries() == before + 1
        index = index_outputs(reference, {"a", "b"}, ["a", "b"], chunk_size=1)
        assert [piece.cases for piece in index.slices] == [1, 1]
        outputs = [o.output for piece in index.slices for o in read_slice(piece, {"a", "b"})]
        assert outputs == ["first", "second"]
    assert staging.entries() == before


def test_the_entry_is_dropped_when_the_block_fails() -> None:
    before = staging.entries()
    with pytest.raises(RuntimeError), staging.staged(LINES) as reference:
        raise RuntimeError("the run failed")
    assert staging.entries() == before
    with pytest.raises(InputError, match="no such staged outputs"):
        output_sources(reference)
    with pytest.raises(InputError, match="exist only while"):
        staging.read(reference, 0, 10)


def test_input_errors_in_staged_outputs_name_the_line_not_the_text() -> None:
    data = LINES + b'\n{"case_id": "zz", "output": "secret text"}'
    with staging.staged(data) as reference, pytest.raises(InputError) as caught:
        index_outputs(reference, {"a", "b"}, ["a", "b"], chunk_size=10)
    assert caught.value.line == 3 and caught.value.field == "case_id"
    assert "secret text" not in str(caught.value)
