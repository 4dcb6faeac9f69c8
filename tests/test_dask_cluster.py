"""Suite runs on a real Dask cluster (a `dask scheduler` and two `dask worker` processes on
loopback), reporting to a real Prefect API: case-for-case equal to a sequential run, nothing lost
when a worker is killed mid-run, and a clear error when no scheduler answers."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from assay.runs.chunks import read_chunk
from assay.runs.options import GateOptions, RunOptions
from assay.runs.records import EvalResult, load_aggregate
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite
from flows.gate import gate as gate_flow
from flows.suite_run import suite_run as suite_run_flow
from tasks.verdicts import verdict_result
from tests.conftest import PREFECT_HOME
from tests.dask_cluster import DaskCluster
from tests.launched import suite_run
from tests.servers import free_port

pytestmark = pytest.mark.usefixtures("prefect_api")

CANARY = "CANARY-dask-77c1-never-stored"
CASES = 600
CHUNK = 25
BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
WATCH_SECONDS = 300


def _suite_and_outputs(tmp_path: Path, cases: int) -> tuple[Path, Path]:
    """A suite where about a third of the outputs fail and every tenth case has none."""
    documents = [
        {"id": f"c{i:05d}", "input": "q", "scorers": [{"contains": "yes"}, {"regex": r"#\d+"}]}
        for i in range(cases)
    ]
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"suite": "dask-equal", "cases": documents}))
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": d["id"], "output": f"{'yes' if i % 3 else 'no'} #{i} {CANARY}"})
            + "\n"
            for i, d in enumerate(documents)
            if i % 10
        )
    )
    return suite, outputs


def _run(store: FileStore, ref: str, outputs: Path, dask: str | None) -> EvalResult:
    """On the cluster at `dask` as `assay run --dask` runs it (the launcher); else the flow on
    its threads."""
    options = {"suite": ref, "outputs": str(outputs), "subject": "agent:dask@v1"}
    if dask is not None:
        return suite_run(**options, chunk_size=CHUNK, dask=dask)
    return verdict_result(
        suite_run_flow(RunOptions(**options, chunk_size=CHUNK), return_state=True)  # type: ignore[arg-type]
    )


def _comparable(result: EvalResult) -> dict[str, Any]:
    """Everything but the identity, the timing and the comparison (the later run compares
    itself with the earlier one)."""
    return result.model_dump(exclude={"run_id", "occurred_at", "regression"})


def _chunks(store: FileStore, run_id: str) -> list[Any]:
    keys = list(store.list(f"runs/{run_id}/cases/"))
    return [read_chunk(store, run_id, n).model_dump(exclude={"run_id"}) for n in range(len(keys))]


def _tasks_done(cluster: DaskCluster) -> dict[str, int]:
    """Task transitions each live worker has made, by worker name."""
    with cluster.client() as client:
        counts = client.run(
            lambda dask_worker: (dask_worker.name, dask_worker.state.transition_counter)
        )
    return dict(counts.values())


def test_two_worker_cluster_equals_the_sequential_run_case_for_case(
    store_dir: Path, tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    store = FileStore(store_dir)
    suite, outputs = _suite_and_outputs(tmp_path, CASES)
    ref = registry.publish(store, load_suite(suite))[0].ref

    sequential = _run(store, ref, outputs, None)
    on_dask = _run(store, ref, outputs, dask_cluster.address)

    assert on_dask.run_id != sequential.run_id
    assert _comparable(on_dask) == _comparable(sequential)
    m = on_dask.metrics
    assert (m.cases, m.scored, m.missing, m.passed) == (CASES, CASES, 60, 360)
    chunks = _chunks(store, on_dask.run_id)
    assert len(chunks) == load_aggregate(store, on_dask.run_id).chunks
    assert chunks == _chunks(store, sequential.run_id)
    assert all(count > 0 for count in _tasks_done(dask_cluster).values())  # both workers scored
    # Task arguments and results crossed process boundaries as references and verdicts only.
    assert CANARY.encode() not in dask_cluster.log_bytes()
    written = [p for p in [*store_dir.rglob("*"), *PREFECT_HOME.rglob("*")] if p.is_file()]
    assert [p for p in written if CANARY.encode() in p.read_bytes()] == []


def test_a_deployment_s_run_scores_on_the_cluster_its_options_name(
    store_dir: Path, tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    """A deployment calls the flow with its options alone (no launcher): `dask` takes effect
    there as it does through `assay run --dask` — for a suite run, and for a gate's."""
    store = FileStore(store_dir)
    suite, outputs = _suite_and_outputs(tmp_path, 100)
    ref = registry.publish(store, load_suite(suite))[0].ref
    options = RunOptions(
        suite=ref,
        outputs=str(outputs),  # type: ignore[arg-type]
        subject="agent:dask@v1",
        chunk_size=CHUNK,
        dask=dask_cluster.address,
    )
    before = sum(_tasks_done(dask_cluster).values())
    result = verdict_result(suite_run_flow(options, return_state=True))
    after_run = sum(_tasks_done(dask_cluster).values())
    assert result.metrics.cases == 100
    assert after_run > before  # the chunks were scored on the cluster's workers
    gate_flow(GateOptions.model_validate(options.model_dump()), return_state=True)
    assert sum(_tasks_done(dask_cluster).values()) > after_run


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(
    store_dir: Path, tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    store = FileStore(store_dir)
    cases = 2000
    suite, outputs = _suite_and_outputs(tmp_path, cases)
    ref = registry.publish(store, load_suite(suite))[0].ref
    finished: list[EvalResult] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            finished.append(_run(store, ref, outputs, dask_cluster.address))
        except BaseException as exc:
            errors.append(exc)

    runner = threading.Thread(target=run)
    runner.start()
    victim = "worker-a"
    with dask_cluster.client() as client:
        deadline = time.monotonic() + WATCH_SECONDS
        while time.monotonic() < deadline and runner.is_alive():
            busy = client.run_on_scheduler(
                lambda dask_scheduler: {
                    w.name for w in dask_scheduler.workers.values() if w.processing
                }
            )
            if victim in busy and _tasks_done(dask_cluster).get(victim, 0) > 0:
                break
            time.sleep(0.05)
    assert runner.is_alive(), "the run ended before the worker could be killed"
    dask_cluster.kill(victim)
    runner.join(WATCH_SECONDS)

    assert not errors, errors
    (result,) = finished
    m = result.metrics
    assert (m.cases, m.scored, m.missing, m.passed) == (cases, cases, 200, 1200)
    expected_chunks = load_aggregate(store, result.run_id).chunks
    assert list(store.list(f"runs/{result.run_id}/cases/")) == [
        f"runs/{result.run_id}/cases/{n:06d}.json" for n in range(expected_chunks)
    ]
    case_ids = [c["case_id"] for chunk in _chunks(store, result.run_id) for c in chunk["cases"]]
    assert sorted(case_ids) == [f"c{i:05d}" for i in range(cases)]  # each case exactly once
    assert set(_tasks_done(dask_cluster)) == {"worker-b"}


def test_an_unreachable_cluster_exits_2_naming_the_address(tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{free_port()}"
    done = subprocess.run(
        [
            str(BIN / "assay"),
            "run",
            str(REPO / "examples" / "support-suite.yaml"),
            "--outputs",
            str(REPO / "examples" / "outputs" / "support-bot-v1.jsonl"),
            "--store",
            f"file://{tmp_path / 'store'}",
            "--dask",
            address,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"error: {address}: no Dask scheduler answered within 10 s (OSError)"
    ]
    assert "Traceback" not in done.stdout + done.stderr
