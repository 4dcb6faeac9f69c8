"""Outputs are pinned when indexed: a chunk that finds other bytes than the index saw fails the run.

Each scoring chunk re-reads its byte range long after the index pass. The index records what the
range must hold (a digest of its bytes; for S3 also the object's ETag and version), so a file
rewritten with the same length, truncated, or an S3 object overwritten under a running run is
one line naming the file and the chunk, never a pass on other outputs. Against real files, a
real moto S3 server, the real Prefect API and the local judge server (whose first request is
where the test rewrites the file, while the later chunks still wait for a thread).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.errors import InputError
from assay.outputs.index import index_outputs
from assay.outputs.slices import OutputsIndex, read_slice
from assay.runs.records import RunStatus, load_aggregate
from assay.s3 import make_client
from assay.schemes.s3 import parse_s3_uri
from assay.store import FileStore
from tests.judge_server import JudgeServer, RecordedRequest, Reply, verdict
from tests.launched import suite_run
from tests.servers import S3Server

CASES = [f"c{n:02d}" for n in range(12)]


def _lines(answers: dict[str, str]) -> bytes:
    return "".join(
        json.dumps({"case_id": case, "output": answer}) + "\n" for case, answer in answers.items()
    ).encode()


def _honest(cases: list[str]) -> dict[str, str]:
    """The first half passes (`yes`), the second half fails (`no!`, the same length)."""
    return {case: "yes" if n < len(cases) // 2 else "no!" for n, case in enumerate(cases)}


def _reversed_lines(data: bytes) -> bytes:
    """The same lines (so the same length) in the opposite order: every range holds other ids."""
    lines = data.splitlines(keepends=True)
    return b"".join(reversed(lines))


def _index(uri: str, chunk_size: int = 4) -> OutputsIndex:
    return index_outputs(uri, set(CASES), CASES, chunk_size)


def test_a_file_rewritten_with_the_same_length_fails_the_chunk_that_reads_it(
    tmp_path: Path,
) -> None:
    outputs = tmp_path / "out.jsonl"
    original = _lines(_honest(CASES))
    outputs.write_bytes(original)
    index = _index(str(outputs))
    assert [o.case_id for o in read_slice(index.slices[0], set(CASES))] == CASES[:4]

    rewritten = _reversed_lines(original)
    assert len(rewritten) == len(original) and rewritten != original
    outputs.write_bytes(rewritten)

    with pytest.raises(InputError) as caught:
        list(read_slice(index.slices[1], set(CASES)))
    assert str(caught.value) == (
        f"outputs changed during the run: {outputs} chunk 1 "
        "(the byte range holds other bytes than when it was indexed)"
    )


def test_swapped_answers_of_the_same_length_are_a_change(tmp_path: Path) -> None:
    outputs = tmp_path / "out.jsonl"
    answers = _honest(CASES)
    outputs.write_bytes(_lines(answers))
    index = _index(str(outputs))
    outputs.write_bytes(_lines({case: "yes" for case in answers}))  # every `no!` now passes

    with pytest.raises(InputError, match=rf"^outputs changed during the run: {outputs} chunk 2 "):
        list(read_slice(index.slices[2], set(CASES)))


def test_a_truncated_file_fails_the_chunk_that_reads_it(tmp_path: Path) -> None:
    outputs = tmp_path / "out.jsonl"
    original = _lines(_honest(CASES))
    outputs.write_bytes(original)
    index = _index(str(outputs))
    outputs.write_bytes(original[: len(original) // 2])

    with pytest.raises(InputError) as caught:
        list(read_slice(index.slices[2], set(CASES)))
    assert str(caught.value) == (
        f"outputs changed during the run: {outputs} chunk 2 "
        "(the byte range is shorter than when it was indexed)"
    )


def test_sparse_slices_over_many_blocks_are_pinned_to_every_byte_of_their_range(
    tmp_path: Path,
) -> None:
    # A sample of every 97th case in chunks of 200: slices span several 4 MiB read blocks, hold
    # unselected lines, and the last one is followed by unselected lines it does not include.
    cases = [f"case-{n:05d}" for n in range(40_000)]
    chosen = cases[::97]
    outputs = tmp_path / "big.jsonl"
    outputs.write_bytes(_lines({case: "x" * 280 for case in cases}))
    index = index_outputs(str(outputs), set(cases), chosen, 200)
    assert [piece.cases for piece in index.slices] == [200, 200, 13]
    assert index.slices[0].end - index.slices[0].start > 4 * 1024 * 1024
    read = [o.case_id for piece in index.slices for o in read_slice(piece, set(chosen))]
    assert read == chosen

    data = bytearray(outputs.read_bytes())
    inside = data.index(b'"case-00050"')  # an unselected line within the first slice
    data[inside + 30] = ord("y")
    outputs.write_bytes(bytes(data))

    with pytest.raises(InputError, match=rf"^outputs changed during the run: {outputs} chunk 0 "):
        list(read_slice(index.slices[0], set(chosen)))
    assert len(list(read_slice(index.slices[2], set(chosen)))) == 13


def test_trace_exports_rewritten_after_indexing_fail_the_chunk(tmp_path: Path) -> None:
    from tests.otel_agent import agent_traces, otlp_json

    exports = tmp_path / "traces.jsonl"  # the Collector's file exporter: one document a line
    rows = [{"case_id": case, "output": answer} for case, answer in _honest(CASES).items()]
    original = "".join(otlp_json(agent_traces([row]), indent=None) + "\n" for row in rows)
    exports.write_text(original)
    index = index_outputs(f"{exports}?format=otlp", set(CASES), CASES, 4)
    assert [o.case_id for o in read_slice(index.slices[1], set(CASES))] == CASES[4:8]

    exports.write_bytes(_reversed_lines(original.encode()))

    with pytest.raises(InputError) as caught:
        list(read_slice(index.slices[1], set(CASES)))
    assert str(caught.value).startswith(f"outputs changed during the run: {exports} chunk 1 (")


@pytest.mark.parametrize("server", ["moto_s3", "rclone_s3"])
def test_an_s3_object_overwritten_after_indexing_fails_the_chunk(
    server: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3: S3Server = request.getfixturevalue(server)
    bucket, _ = parse_s3_uri(s3.use_from_env(monkeypatch))
    key = "outputs/run.jsonl"
    uri = f"s3://{bucket}/{key}"  # indexed through its prefix, named by the object
    client = make_client()
    original = _lines(_honest(CASES))
    client.put_object(Bucket=bucket, Key=key, Body=original)
    index = _index(f"s3://{bucket}/outputs/")

    client.put_object(Bucket=bucket, Key=key, Body=_reversed_lines(original))

    with pytest.raises(InputError) as caught:
        list(read_slice(index.slices[1], set(CASES)))
    assert str(caught.value).startswith(f"outputs changed during the run: {uri} chunk 1 (")


def test_a_versioned_s3_object_is_read_at_the_version_indexed(s3_env: str) -> None:
    bucket, _ = parse_s3_uri(s3_env)
    key = "outputs/versioned.jsonl"
    client = make_client()
    client.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    answers = _honest(CASES)
    client.put_object(Bucket=bucket, Key=key, Body=_lines(answers))
    index = _index(f"s3://{bucket}/outputs/")
    assert index.slices[0].version_id

    client.put_object(Bucket=bucket, Key=key, Body=_reversed_lines(_lines(answers)))

    read = [o for piece in index.slices for o in read_slice(piece, set(CASES))]
    assert [(o.case_id, o.output) for o in read] == list(answers.items())


# --- a whole run ------------------------------------------------------------------------------


def _judged_suite(tmp_path: Path, cases: list[str]) -> Path:
    scorers = [{"contains": "yes"}, {"llm_judge": {"rubric": "Answers the question."}}]
    suite = tmp_path / "pinned.json"
    suite.write_text(
        json.dumps(
            {
                "suite": "pinned",
                "cases": [{"id": c, "input": "q", "scorers": scorers} for c in cases],
            }
        )
    )
    return suite


@pytest.mark.usefixtures("prefect_api")
def test_outputs_rewritten_mid_run_fail_the_run_and_a_resume_rechecks_them(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    cases = [f"c{n:02d}" for n in range(40)]  # 8 chunks of 5, 4 in flight at once
    suite = _judged_suite(tmp_path, cases)
    outputs = tmp_path / "out.jsonl"
    original = _lines(_honest(cases))
    outputs.write_bytes(original)
    rewritten = _reversed_lines(original)

    def rewrite_on_first_call(recorded: RecordedRequest) -> Reply:
        # The first judge call comes from a chunk that has read its slice; chunks 4..7 have not
        # started yet (four threads), so they read the rewritten file.
        if outputs.read_bytes() == original:
            outputs.write_bytes(rewritten)
        return verdict("pass", 0.9)

    judge_env.script(default=rewrite_on_first_call)
    run_id = "pinned-run"
    with pytest.raises(InputError) as caught:
        suite_run(
            suite=str(suite), outputs=str(outputs), chunk_size=5, run_id=run_id, subject="agent:a"
        )
    message = str(caught.value)
    assert message.startswith(f"outputs changed during the run: {outputs} chunk ")
    assert "\n" not in message
    store = FileStore(store_dir)
    failed = load_aggregate(store, run_id)
    assert failed.status is RunStatus.FAILED
    assert failed.error is not None and "outputs changed during the run" in failed.error

    # A resume indexes the file again and compares it with what the run was recorded with.
    with pytest.raises(InputError, match=r"^--resume: .*outputs changed since the run began"):
        suite_run(
            suite=str(suite),
            outputs=str(outputs),
            chunk_size=5,
            run_id=run_id,
            subject="agent:a",
            resume=True,
        )

    outputs.write_bytes(original)  # the outputs the run began with: the resume completes honestly
    judge_env.script(default=verdict("pass", 0.9))
    result = suite_run(
        suite=str(suite),
        outputs=str(outputs),
        chunk_size=5,
        run_id=run_id,
        subject="agent:a",
        resume=True,
    )
    assert not result.passed
    assert (result.metrics.cases, result.metrics.passed, result.metrics.failed) == (40, 20, 20)
