"""The suite-run flow against a real Prefect API: evidence, artifacts, chunking, resumption."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
)

from assay.errors import EvidenceConflictError, InputError
from assay.outputs.reference import OutputsReference
from assay.runs.chunks import read_chunk
from assay.runs.pipeline import ChunkJob
from assay.runs.records import RunStatus, load_aggregate, load_result, start_run
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite
from tasks.ingest import ingest_outputs
from tasks.scoring import score_chunk
from tests.conftest import EXAMPLES
from tests.launched import suite_run
from tests.run_plans import a_plan

pytestmark = pytest.mark.usefixtures("prefect_api")


def _publish(store: FileStore, path: Path = EXAMPLES / "support-suite.yaml") -> str:
    version, _ = registry.publish(store, load_suite(path))
    return version.ref


def _write_outputs(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_example_run_records_evidence_result_and_aggregate(store_dir: Path) -> None:
    store = FileStore(store_dir)
    ref = _publish(store)
    outputs = EXAMPLES / "outputs" / "support-bot-v2.jsonl"

    result = suite_run(suite=ref, outputs=str(outputs), subject="agent:support-bot@v2")

    m = result.metrics
    assert (m.cases, m.scored, m.passed, m.failed, m.missing) == (50, 50, 36, 14, 2)
    assert result.pass_rate == pytest.approx(0.72)
    assert result.passed is False  # 0.72 < 0.80
    assert result.metrics.write_guard == "atomic-link"
    assert (result.subject_kind, result.subject_id, result.variant) == (
        "agent",
        "support-bot",
        "v2",
    )
    assert load_result(store, result.run_id).model_dump() == result.model_dump()
    aggregate = load_aggregate(store, result.run_id)
    assert aggregate.status is RunStatus.COMPLETED
    assert aggregate.chunks_done == aggregate.chunks == 2  # one slice + the missing cases
    missing = read_chunk(store, result.run_id, 1)
    assert sorted(c.case_id for c in missing.cases) == [
        "cloudstep-sizes-json",
        "loyalty-balance-json",
    ]
    assert all(c.label == "no output" and c.output_hmac is None for c in missing.cases)


def test_flow_run_is_named_tagged_and_has_artifacts(store_dir: Path) -> None:
    from prefect import tags

    store = FileStore(store_dir)
    ref = _publish(store)
    with tags("assay", "suite:support-bot"):
        result = suite_run(
            suite=ref,
            outputs=str(EXAMPLES / "outputs" / "support-bot-v1.jsonl"),
            subject="agent:support-bot@v1",
        )

    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(result.run_id))
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(result.run_id)])
            )
        )
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[UUID(result.run_id)]))
        )
    assert run.name == f"{ref} · agent:support-bot@v1"
    assert {"assay", "suite:support-bot"} <= set(run.tags)
    by_type = {a.type: a for a in artifacts if not (a.key or "").startswith("assay-report")}
    assert set(by_type) >= {"markdown", "table"}
    assert "45/50" in str(by_type["markdown"].data)
    table = json.loads(str(by_type["table"].data))
    assert len(table) == 50
    assert list(table[0]) == ["case_id", "status", "vs baseline", "score", "label"]
    assert table[0]["status"] == "fail"  # failures first
    # the summary links to this run's per-case table
    assert f"/artifacts/artifact/{by_type['table'].id})" in str(by_type["markdown"].data)
    names = {t.name for t in task_runs}
    assert {"start-run", "compare-with-baseline", "finish-run", "score chunk 0"} <= names
    assert not [name for name in names if re.search(r"-[0-9a-f]{3}$", name)]  # no hash suffix


def test_task_runs_grow_with_chunks_not_cases(store_dir: Path, tmp_path: Path) -> None:
    store = FileStore(store_dir)
    cases = [
        {"id": f"c{i:04d}", "input": "q", "scorers": [{"contains": "ok"}]} for i in range(1200)
    ]
    suite_file = tmp_path / "big.json"
    suite_file.write_text(json.dumps({"suite": "big", "cases": cases}))
    ref = _publish(store, suite_file)
    outputs = _write_outputs(
        tmp_path / "out.jsonl", [{"case_id": c["id"], "output": "ok"} for c in cases]
    )

    def task_count(chunk_size: int, expected: int) -> int:
        """The run's task runs, waiting (up to 30 s) while fewer than `expected` are recorded:
        Prefect 3 records task runs from events, after the flow has returned."""
        result = suite_run(suite=ref, outputs=str(outputs), chunk_size=chunk_size)
        assert result.metrics.passed == 1200
        in_run = FlowRunFilter(id=FlowRunFilterId(any_=[UUID(result.run_id)]))
        deadline = time.monotonic() + 30
        with get_client(sync_client=True) as client:
            while True:
                count = len(client.read_task_runs(flow_run_filter=in_run))
                if count >= expected or time.monotonic() > deadline:
                    return count
                time.sleep(0.2)

    # resolve-suite, ingest, start, settle-cases, compare, finish, publish-report,
    # report-findings; one task per chunk
    assert task_count(2000, 8 + 1) == 8 + 1
    assert task_count(300, 8 + 4) == 8 + 4


def test_sampled_run_is_reproducible(store_dir: Path) -> None:
    store = FileStore(store_dir)
    ref = _publish(store)
    outputs = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")

    first = suite_run(suite=ref, outputs=outputs, sample=10, seed=7)
    second = suite_run(suite=ref, outputs=outputs, sample=10, seed=7)

    def scored_ids(run_id: str) -> list[str]:
        return [c.case_id for c in read_chunk(store, run_id, 0).cases]

    assert first.metrics.cases == 10
    assert (first.sample, first.seed) == (10, 7)
    assert scored_ids(first.run_id) == scored_ids(second.run_id)
    assert first.pass_rate == second.pass_rate


def test_bad_outputs_fail_the_run_and_write_no_run_evidence(
    store_dir: Path, tmp_path: Path
) -> None:
    store = FileStore(store_dir)
    ref = _publish(store)
    outputs = tmp_path / "bad.jsonl"
    outputs.write_text(
        '{"case_id": "window-40-days", "output": "fine"}\n{"case_id": "window-40-days", "output"\n'
    )

    with pytest.raises(InputError) as caught:
        suite_run(suite=ref, outputs=str(outputs))

    assert caught.value.line == 2
    assert str(outputs) in str(caught.value)
    assert list(store.list("runs/")) == []
    assert list(store.list("index/")) == []


def _resume_fixture(store: FileStore, tmp_path: Path) -> tuple[str, Path, list[dict[str, object]]]:
    cases = [{"id": f"c{i:03d}", "input": "q", "scorers": [{"contains": "yes"}]} for i in range(30)]
    suite_file = tmp_path / "s.json"
    suite_file.write_text(json.dumps({"suite": "resume", "cases": cases}))
    rows = [{"case_id": c["id"], "output": "yes" if i % 3 else "no"} for i, c in enumerate(cases)]
    return _publish(store, suite_file), _write_outputs(tmp_path / "out.jsonl", rows), rows


def _interrupt_after_first_chunk(store: FileStore, ref: str, outputs: Path, run_id: str) -> None:
    """Leave the store exactly as a run that died after persisting chunk 0 leaves it."""
    index = ingest_outputs.fn(store.uri, ref, OutputsReference(location=str(outputs)), None, 0, 10)
    version, suite = registry.resolve(store, ref)
    start_run(
        store,
        a_plan(
            run_id=run_id,
            suite=version.suite,
            suite_version=version.version,
            subject_id="out",
            pass_threshold=suite.pass_threshold,
            outputs=str(outputs),
            cases=30,
            chunks=len(index.slices),
        ),
    )
    job = ChunkJob(
        store=store.uri,
        run_id=run_id,
        suite_ref=ref,
        chunk=0,
        piece=index.slices[0],
        missing=[],
        sample=None,
        seed=0,
        subject="agent:out",
    )
    summary = score_chunk.fn(job)
    assert summary.written


def test_interrupted_run_resumes_without_duplicate_or_lost_evidence(
    store_dir: Path, tmp_path: Path
) -> None:
    store = FileStore(store_dir)
    ref, outputs, _ = _resume_fixture(store, tmp_path)
    run_id = str(uuid4())
    _interrupt_after_first_chunk(store, ref, outputs, run_id)
    first_chunk = store.get(f"runs/{run_id}/cases/000000.json")
    assert load_aggregate(store, run_id).status is RunStatus.RUNNING

    result = suite_run(suite=ref, outputs=str(outputs), chunk_size=10, run_id=run_id)

    assert list(store.list(f"runs/{run_id}/cases/")) == [
        f"runs/{run_id}/cases/{n:06d}.json" for n in range(3)
    ]
    assert store.get(f"runs/{run_id}/cases/000000.json") == first_chunk
    assert (result.metrics.cases, result.metrics.passed, result.metrics.failed) == (30, 20, 10)
    assert load_aggregate(store, run_id).status is RunStatus.COMPLETED
    again = suite_run(suite=ref, outputs=str(outputs), chunk_size=10, run_id=run_id)
    assert (
        again.model_dump() == result.model_dump()
    )  # the first EvalResult stands; nothing is written twice


def test_resume_with_different_outputs_is_refused_not_overwritten(
    store_dir: Path, tmp_path: Path
) -> None:
    store = FileStore(store_dir)
    ref, outputs, rows = _resume_fixture(store, tmp_path)
    run_id = str(uuid4())
    _interrupt_after_first_chunk(store, ref, outputs, run_id)
    first_chunk = store.get(f"runs/{run_id}/cases/000000.json")
    # the same file, edited: the plan matches, the evidence does not (another path is refused
    # before anything is written: tests/test_resume.py)
    changed = _write_outputs(outputs, [{**row, "output": "yes"} for row in rows])

    with pytest.raises(EvidenceConflictError):
        suite_run(suite=ref, outputs=str(changed), chunk_size=10, run_id=run_id)

    assert store.get(f"runs/{run_id}/cases/000000.json") == first_chunk
    assert load_aggregate(store, run_id).status is RunStatus.FAILED
