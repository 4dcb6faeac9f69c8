"""A run's judge configuration travels with it to every Dask worker: the workers start with the
API key only, and judge with the launching process's model, endpoint and concurrency, keeping as
many calls in flight per worker process as the same run keeps in-process (docs/scale.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.judge_server import JudgeServer, slow, verdict
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

CASES = 48
CHUNK = 6
CONCURRENCY = 3


def _judged_suite(tmp_path: Path) -> tuple[str, str]:
    documents = [
        {"id": f"c{i:03d}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Answers."}}]}
        for i in range(CASES)
    ]
    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"suite": "judged-on-dask", "cases": documents}))
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": d["id"], "output": f"answer {d['id']}"}) + "\n"
            for d in documents
        )
    )
    return str(suite), str(outputs)


def test_a_run_keeps_its_judge_concurrency_in_process_and_on_each_dask_worker(
    judge_server: JudgeServer,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from distributed import LocalCluster

    suite, outputs = _judged_suite(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the one judge setting a worker brings
    for name in ("ASSAY_JUDGE_MODEL", "OPENAI_BASE_URL", "ASSAY_JUDGE_CONCURRENCY"):
        monkeypatch.delenv(name, raising=False)
    # One worker process with two threads: two chunks judge side by side in it, as four do
    # in the launching process's thread pool.
    with LocalCluster(  # type: ignore[no-untyped-call]
        n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
    ) as cluster:
        monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-test-1")
        monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
        monkeypatch.setenv("ASSAY_JUDGE_CONCURRENCY", str(CONCURRENCY))
        judge_server.script(default=slow(0.3, verdict("pass", 0.9)))
        on_dask = suite_run(
            suite=suite,
            outputs=outputs,
            chunk_size=CHUNK,
            fresh_judge=True,
            dask=cluster.scheduler_address,
        )
        on_dask_in_flight = judge_server.max_in_flight

    judge_server.reset()
    judge_server.script(default=slow(0.3, verdict("pass", 0.9)))
    in_process = suite_run(suite=suite, outputs=outputs, chunk_size=CHUNK, fresh_judge=True)

    for result in (on_dask, in_process):
        assert (result.metrics.judge_calls, result.metrics.judged_checks) == (CASES, CASES)
        assert result.judge is not None and result.judge.model == "judge-test-1"
    assert (on_dask_in_flight, judge_server.max_in_flight) == (CONCURRENCY, CONCURRENCY)
