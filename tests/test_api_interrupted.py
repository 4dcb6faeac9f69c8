"""`assay serve` killed (SIGKILL) during an inline-output run: on restart the service marks the
run interrupted with "submit the run again" (its outputs were never kept, so `--resume` cannot
continue it) and its Prefect flow run Crashed, instead of both showing Running for ever."""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import suppress
from pathlib import Path
from uuid import UUID

import httpx
from prefect.client.orchestration import get_client

from assay.runs.records import RunStatus, load_aggregate
from assay.store import FileStore
from tests.api_service import Service, start_service
from tests.judge_server import JudgeServer, slow

CASES = [
    {"id": f"c{i:02d}", "input": "q", "scorers": [{"llm_judge": {"rubric": "Polite?"}}]}
    for i in range(6)
]


def _running_run(store: FileStore) -> str:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for key in store.list("index/runs/"):
            run_id = key.removeprefix("index/runs/").removesuffix(".json")
            if load_aggregate(store, run_id).status is RunStatus.RUNNING:
                return run_id
        time.sleep(0.5)
    raise AssertionError("the run never started")


def _submit(service: Service) -> None:
    outputs = [{"case_id": case["id"], "output": "yes"} for case in CASES]
    with suppress(httpx.HTTPError), service.client("operator") as client:
        client.post("/runs", json={"suite": "killed", "subject": "agent:a", "outputs": outputs})


def test_a_run_killed_with_the_service_says_resubmit_and_its_flow_run_crashed(
    tmp_path: Path, prefect_api: str, judge_env: JudgeServer
) -> None:
    judge_env.script(default=slow(300))
    service = start_service(tmp_path, prefect_api_url=prefect_api)
    try:
        with service.client("operator") as client:
            published = client.post("/suites", json={"suite": "killed", "cases": CASES})
            assert published.status_code == 201, published.text
        threading.Thread(target=_submit, args=(service,), daemon=True).start()
        store = FileStore(service.store_dir)
        run_id = _running_run(store)
        os.kill(service.process.pid, signal.SIGKILL)
        service.process.stop()
        killed = load_aggregate(store, run_id)
        service.process.start()
        with service.client("viewer") as client:
            shown = client.get(f"/runs/{run_id}")
    finally:
        service.stop()
    assert shown.status_code == 409, shown.text
    detail = shown.json()["detail"]
    assert "interrupted" in detail and "submit the run again" in detail
    assert "--resume" not in detail
    assert killed.owner is not None and killed.owner.flow_run is not None
    with get_client(sync_client=True) as prefect:
        state = prefect.read_flow_run(UUID(killed.owner.flow_run)).state
    assert state is not None and state.type.value == "CRASHED"
