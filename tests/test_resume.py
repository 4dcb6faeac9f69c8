"""Resumes that lose nothing: a refused resume leaves the recorded run alone, an unknown id is an
error, and a killed run is found stale, marked `interrupted` and resumed to completion.

Against a real Prefect API, the local judge server and a real `assay run` process killed with
SIGKILL mid-run.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from uuid import UUID, uuid4

import pytest
from prefect.client.orchestration import get_client
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.finops.ledger import CostRecord, read_costs
from assay.runs.lifecycle import settled, stale_reason
from assay.runs.records import RunOwner, RunStatus, load_aggregate, load_result, now
from assay.store import FileStore
from tests.judge_server import JudgeServer, slow, verdict
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

ASSAY = str(Path(sys.executable).parent / "assay")


def _suite(tmp_path: Path, name: str = "resumable", judged: bool = False) -> tuple[Path, Path]:
    check = {"llm_judge": {"rubric": "Is polite."}} if judged else {"contains": "yes"}
    cases = [{"id": f"c{i:02d}", "input": "q", "scorers": [check]} for i in range(12)]
    suite = tmp_path / f"{name}.json"
    suite.write_text(json.dumps({"suite": name, "cases": cases}))
    outputs = tmp_path / "out.jsonl"
    outputs.write_text(
        "".join(json.dumps({"case_id": c["id"], "output": "yes"}) + "\n" for c in cases)
    )
    return suite, outputs


def _stored(store_dir: Path, run_id: str) -> dict[str, bytes]:
    root = store_dir / "runs" / run_id
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_refused_resume_leaves_the_completed_run_untouched(
    store_dir: Path, tmp_path: Path
) -> None:
    other_suite, _ = _suite(tmp_path, name="another")
    suite, outputs = _suite(tmp_path)
    other_outputs = tmp_path / "other.jsonl"
    other_outputs.write_text(outputs.read_text())
    done = suite_run(suite=str(suite), outputs=str(outputs), chunk_size=5, subject="agent:bot")
    run_id = done.run_id
    before = _stored(store_dir, run_id)

    attempts = {
        "outputs": {"suite": str(suite), "outputs": str(other_outputs), "chunk_size": 5},
        "suite": {"suite": str(other_suite), "outputs": str(outputs), "chunk_size": 5},
        "chunks": {"suite": str(suite), "outputs": str(outputs), "chunk_size": 6},
    }
    for changed, arguments in attempts.items():
        with pytest.raises(InputError) as caught:
            suite_run(  # type: ignore[arg-type]
                **arguments, subject="agent:bot", run_id=done.run_id, resume=True
            )
        assert f"recorded with {changed} " in caught.value.problem
        assert caught.value.problem.endswith("nothing was changed")

    assert _stored(store_dir, done.run_id) == before  # aggregate, chunks and EvalResult
    store = FileStore(store_dir)
    assert load_aggregate(store, done.run_id).status is RunStatus.COMPLETED
    again = suite_run(
        suite=str(suite),
        outputs=str(outputs),
        chunk_size=5,
        subject="agent:bot",
        run_id=done.run_id,
    )
    assert again.model_dump() == load_result(store, run_id).model_dump() == done.model_dump()


def test_resume_of_an_unknown_run_is_an_error_not_a_new_run(
    store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path)
    unknown = str(uuid4())

    result = CliRunner().invoke(
        app, ["run", str(suite), "--outputs", str(outputs), "--resume", unknown]
    )

    assert result.exit_code == 2, result.output
    assert f"no run '{unknown}' to resume" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (store_dir / "runs").exists()


def test_heartbeat_rule_for_a_run_owned_on_another_host(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite, outputs = _suite(tmp_path)
    store = FileStore(store_dir)
    run = load_aggregate(store, suite_run(suite=str(suite), outputs=str(outputs)).run_id)
    running = run.model_copy(
        update={"status": RunStatus.RUNNING, "owner": RunOwner(host="elsewhere", pid=1)}
    )
    monkeypatch.setenv("ASSAY_RUN_STALE_SECONDS", "600")

    assert stale_reason(running, at=running.updated_at + timedelta(seconds=599)) is None
    reason = stale_reason(running, at=running.updated_at + timedelta(seconds=601))
    assert reason is not None and "no heartbeat for 601s" in reason
    assert stale_reason(running, at=now()) is None
    assert settled(running).status is RunStatus.RUNNING  # live: left alone


@pytest.fixture
def hanging_judge(judge_env: JudgeServer) -> JudgeServer:
    judge_env.script(default=slow(300))
    return judge_env


def _wait_for_running_run(store: FileStore, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        for key in store.list("index/runs/"):
            run_id = key.removeprefix("index/runs/").removesuffix(".json")
            if load_aggregate(store, run_id).status is RunStatus.RUNNING:
                return run_id
        time.sleep(0.5)
    raise AssertionError("the run never started")


def _start_run(suite: Path, outputs: Path, prefect_api: str) -> subprocess.Popen[bytes]:
    """`assay run` in its own process group (so a test can kill it and its children)."""
    return subprocess.Popen(
        [ASSAY, "run", str(suite), "--outputs", str(outputs), "--json"],
        env={**os.environ, "PREFECT_API_URL": prefect_api},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def test_a_killed_run_is_marked_interrupted_then_resumed_to_completion(
    hanging_judge: JudgeServer, prefect_api: str, store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path, judged=True)
    store = FileStore(store_dir)
    process = _start_run(suite, outputs, prefect_api)
    try:
        run_id = _wait_for_running_run(store, process)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    killed = load_aggregate(store, run_id)
    assert killed.owner is not None and killed.owner.pid == process.pid

    listed = CliRunner().invoke(app, ["runs", "list", "--json"])
    shown = CliRunner().invoke(app, ["runs", "show", run_id])

    (row,) = [r for r in json.loads(listed.stdout) if r["run_id"] == run_id]
    assert row["status"] == "interrupted"
    assert f"process {process.pid}" in row["error"]
    assert "interrupted" in shown.output and f"--resume {run_id}" in shown.output
    assert load_aggregate(store, run_id).status is RunStatus.RUNNING  # reads never write

    hanging_judge.script(default=verdict("pass", 0.9))
    result = suite_run(suite=str(suite), outputs=str(outputs), run_id=run_id, resume=True)

    assert (result.run_id, result.passed, result.metrics.scored) == (run_id, True, 12)
    assert load_aggregate(store, run_id).status is RunStatus.COMPLETED
    assert killed.owner.flow_run is not None
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(UUID(killed.owner.flow_run)).state
    assert state is not None and state.type.value == "CRASHED"


def test_a_resumed_runs_judge_figures_cover_every_attempt(
    judge_env: JudgeServer,
    prefect_api: str,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    judge_env.script(*[verdict("pass", 0.9)] * 4, default=slow(300))  # 4 paid, then it hangs
    suite, outputs = _suite(tmp_path, name="paid-twice", judged=True)
    store = FileStore(store_dir)
    process = _start_run(suite, outputs, prefect_api)
    try:
        run_id = _wait_for_running_run(store, process)
        deadline = time.monotonic() + 120
        while paid(_run_costs(store, run_id)) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    paid_before = paid(_run_costs(store, run_id))

    judge_env.script(default=verdict("pass", 0.9))
    result = suite_run(suite=str(suite), outputs=str(outputs), run_id=run_id, resume=True)

    ledger = _run_costs(store, run_id)
    assert paid_before == 4
    assert result.metrics.judge_calls == sum(record.calls for record in ledger) == 12
    assert result.metrics.judge_cost_usd == pytest.approx(
        math.fsum(record.cost_usd for record in ledger)
    )
    assert result.metrics.judge_cost_usd == pytest.approx(12 * (120 * 1.0 + 30 * 2.0) / 1e6)


def paid(records: list[CostRecord]) -> int:
    """The calls records stand for (one record may stand for a group of calls)."""
    return sum(record.calls for record in records)


def _run_costs(store: FileStore, run_id: str) -> list[CostRecord]:
    today = now().date()
    return [r for r in read_costs(store, today - timedelta(days=1), today) if r.run_id == run_id]
