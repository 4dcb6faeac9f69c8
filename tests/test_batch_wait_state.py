"""A batch-mode run's wait shows in Prefect (#38, item 4): while a chunk waits for the Batch API,
its task run's state message carries the batch's counts, read back from the real Prefect API of
the session; the fake Batch API (`tests/batch_server.py`) is driven by the real `openai` SDK."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from uuid import UUID

import pytest
import yaml
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterName

from tests.batch_server import BatchServer

# The fake Batch API's fixtures (tests/conftest.py does not import them for every module).
from tests.batch_server import batch_server as batch_server
from tests.batch_server import batch_server_session as batch_server_session
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

CASES = 20
SEEN_TIMEOUT_SECONDS = 30.0


def _suite_and_outputs(tmp_path: Path) -> tuple[str, str]:
    cases = [
        {
            "id": f"c{i:02d}",
            "input": f"question {i}",
            "scorers": [{"llm_judge": {"rubric": "Answers the question."}}],
        }
        for i in range(CASES)
    ]
    suite = tmp_path / "batched.yaml"
    suite.write_text(yaml.safe_dump({"suite": "batch-wait-shown", "cases": cases}))
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:02d}", "output": f"answer {i}"}) + "\n"
            for i in range(CASES)
        )
    )
    return str(suite), str(outputs)


class _Watch:
    """Polls the Prefect API for the score-chunk task run whose state message is `expected`
    (set once the batch exists), then releases the held batch."""

    def __init__(self, server: BatchServer) -> None:
        self.server = server
        self.task_run: UUID | None = None
        self.message = ""
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        deadline = time.monotonic() + SEEN_TIMEOUT_SECONDS
        names = TaskRunFilter(name=TaskRunFilterName(any_=["score chunk 0"]))
        try:
            with get_client(sync_client=True) as client:
                while time.monotonic() < deadline and self.task_run is None:
                    time.sleep(0.1)
                    if not self.server.batches:
                        continue
                    self.message = (
                        f"waiting for batch {self.server.batches[0].id}: 7/{CASES} done, 2 failed"
                    )
                    for run in client.read_task_runs(task_run_filter=names):
                        if run.state is not None and run.state.message == self.message:
                            self.task_run = run.id
        finally:
            self.server.release()  # seen or not: the run goes on, and the test says which


def test_the_wait_for_a_batch_is_the_task_runs_state_message_with_counts(
    batch_server: BatchServer,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in {
        "ASSAY_JUDGE_MODEL": "judge-batch-1",
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": batch_server.base_url,
        "ASSAY_JUDGE_MODE": "batch",
        "ASSAY_JUDGE_BATCH_POLL_SECONDS": "0.05",
    }.items():
        monkeypatch.setenv(name, value)
    batch_server.hold(completed=7, failed=2)
    suite, outputs = _suite_and_outputs(tmp_path)
    watch = _Watch(batch_server)
    watch.thread.start()

    result = suite_run(suite=suite, outputs=outputs, subject="agent:batched@v1")
    watch.thread.join(timeout=SEEN_TIMEOUT_SECONDS)

    assert watch.task_run is not None, f"no task run showed {watch.message!r}"
    assert result.metrics.judged_checks == CASES and result.metrics.judge_calls == CASES
    (batch,) = batch_server.batches
    ended = f"batch {batch.id} completed: {CASES}/{CASES} done, 0 failed"
    with get_client(sync_client=True) as client:
        deadline = time.monotonic() + SEEN_TIMEOUT_SECONDS
        while True:
            states = client.read_task_run_states(watch.task_run)
            if (states and states[-1].is_completed()) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    messages = [state.message for state in states if state.is_running()]
    assert watch.message in messages and ended in messages
    assert states[-1].is_completed()
