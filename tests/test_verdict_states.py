"""Verdicts visible in Prefect: each flow's final state, read back from a real Prefect API, is
named for the verdict, Completed when it is positive and Failed when it is not (red, counted,
what automations trigger on), the result still recorded and returned; flow retries never re-run a
verdict; runs started like deployment runs are named `SUITE@VERSION · SUBJECT` and tagged; a
deployment-style run's options are validated with their bounds; Assay's log lines reach the run's
logs, without output text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from prefect import flow
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterParentFlowRunId,
    LogFilter,
    LogFilterFlowRunId,
)
from prefect.settings import get_current_settings

from assay.calibration.options import CalibrationOptions
from assay.gate.decision import GateRun
from assay.release.options import ReleaseOptions
from assay.reports import report_key
from assay.runs.options import GateOptions, RunOptions
from assay.runs.records import EvalResult, load_result
from assay.store import FileStore
from flows.calibration import calibration
from flows.gate import gate as gate_flow
from flows.launch import launch
from flows.nightly import NightlyJob, NightlyOptions, nightly
from flows.release import release
from flows.suite_run import suite_run as suite_run_flow
from tasks.verdicts import verdict_result
from tests.conftest import EXAMPLES
from tests.judge_server import JudgeServer, verdict
from tests.test_calibration import _judges_by_marker, _write_set
from tests.test_minimal_data import _flush_prefect_logs

pytestmark = pytest.mark.usefixtures("prefect_api")

SUITE = str(EXAMPLES / "support-suite.yaml")
V1 = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
V2 = str(EXAMPLES / "outputs" / "support-bot-v2.jsonl")


def _recorded(state: Any) -> Any:
    """The flow run as the Prefect API recorded it."""
    with get_client(sync_client=True) as client:
        return client.read_flow_run(state.state_details.flow_run_id)


def _artifacts(state: Any) -> dict[str, Any]:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])
            )
        )
    return {a.key: a for a in found if a.key}


def suite_run(retries: int = 0, **options: Any) -> Any:
    """The suite-run flow called as a deployment run calls it: its options, no tags; the state."""
    return suite_run_flow.with_options(retries=retries)(RunOptions(**options), return_state=True)


def gate(**options: Any) -> Any:
    return gate_flow(GateOptions(**options), return_state=True)


def _final(state: Any) -> tuple[str, str, str]:
    recorded = _recorded(state).state
    return recorded.type.value, recorded.name, recorded.message or ""


def test_suite_run_states_passed_not_passed_regressed_and_deployment_naming(
    store_dir: Path,
) -> None:
    # Called with a suite *file* and no tags, as a deployment run is.
    v1 = suite_run(suite=SUITE, outputs=V1, subject="agent:support-bot@v1")
    assert _final(v1)[:2] == ("COMPLETED", "Passed")
    assert "pass rate 0.900 (45/50" in _final(v1)[2]
    run = _recorded(v1)
    assert run.name == "support-bot@1 · agent:support-bot@v1"
    assert {"assay", "suite:support-bot", "subject:agent:support-bot@v1"} <= set(run.tags)

    alone = suite_run(suite=SUITE, outputs=V2, subject="agent:other@v2")
    assert _final(alone)[:2] == ("FAILED", "Not passed")
    assert not verdict_result(alone).passed  # the result is recorded and returned
    assert "below threshold 0.80" in _final(alone)[2]

    baseline = v1.result().run_id
    v2 = suite_run(
        suite="support-bot",
        outputs=V2,
        subject="agent:support-bot@v2",
        baseline=baseline,
        retries=2,
    )
    kind, name, message = _final(v2)
    assert (kind, name) == ("FAILED", "Regressed")
    assert f"baseline {baseline}" in message
    assert _recorded(v2).run_count == 1  # a verdict is not a failure that flow retries re-run
    assert verdict_result(v2).regression.status.value == "regressed"
    assert _recorded(v2).name == "support-bot@1 · agent:support-bot@v2"

    artifacts = _artifacts(v2)
    assert set(artifacts) == {
        "assay-run-support-bot-v2-summary",
        "assay-run-support-bot-v2-cases",
        "assay-report-support-bot-v2",
    }
    summary = str(artifacts["assay-run-support-bot-v2-summary"].data)
    assert f"/runs/flow-run/{baseline})" in summary  # the baseline id links to its run page
    assert f"/runs/flow-run/{v2.state_details.flow_run_id})" in summary
    table = json.loads(str(artifacts["assay-run-support-bot-v2-cases"].data))
    changes = [row["vs baseline"] for row in table]
    assert changes[0] == "newly failing" and "unchanged" in changes
    first_other = next(i for i, c in enumerate(changes) if c != "newly failing")
    assert "newly failing" not in changes[first_other:]  # newly failing cases come first
    assert all(row["score"] is None or round(row["score"], 3) == row["score"] for row in table)
    v1_table = json.loads(str(_artifacts(v1)["assay-run-support-bot-v1-cases"].data))
    assert {row["vs baseline"] for row in v1_table} == {"no baseline"}

    _flush_prefect_logs()
    with get_client(sync_client=True) as client:
        logs = client.read_logs(
            LogFilter(
                flow_run_id=LogFilterFlowRunId(any_=[UUID(str(v1.state_details.flow_run_id))])
            )
        )
    messages = [log.message for log in logs]
    assert any(m.startswith("chunk 0: 50 case(s), 45 passed, 5 failed") for m in messages)
    assert any(m.startswith("verdict: Passed (pass rate 0.900") for m in messages)
    outputs_text = {line for line in Path(V1).read_text().splitlines()}
    assert not any(text in m for m in messages for text in outputs_text)


def test_gate_states(store_dir: Path) -> None:
    passed = gate(suite=SUITE, outputs=V1, subject="agent:support-bot@v1")
    assert _final(passed)[:2] == ("COMPLETED", "Gate passed")
    failed = gate(suite=SUITE, outputs=V2, subject="agent:support-bot@v2")
    kind, name, message = _final(failed)
    decision = verdict_result(failed).decision
    assert (kind, name) == ("FAILED", "Gate failed")
    # The suite run inside it failed its verdict too, without crashing the gate.
    with get_client(sync_client=True) as client:
        (child,) = client.read_flow_runs(
            flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(
                    any_=[failed.state_details.flow_run_id]
                )
            )
        )
    assert child.state is not None and (child.state.type.value, child.state.name) == (
        "FAILED",
        "Not passed",
    )
    assert message.startswith(f"{decision.reasons[0].rule}: {decision.reasons[0].message}")


def test_calibration_states(judge_env: JudgeServer, store_dir: Path, tmp_path: Path) -> None:
    set_path = tmp_path / "set.jsonl"
    rows = [(f"g{i}", "Within 30 days.", "pass") for i in range(20)] + [
        (f"b{i}", "Whenever you like.", "fail") for i in range(20)
    ]
    _write_set(set_path, rows)
    judge_env.script(default=_judges_by_marker)
    good = calibration(CalibrationOptions(calibration_set=str(set_path)), return_state=True)
    assert _final(good)[:2] == ("COMPLETED", "Calibrated")
    assert _final(good)[2] == good.result().verdict

    judge_env.script(default=verdict("pass", 0.9))  # passes everything: kappa 0
    bad = calibration(
        CalibrationOptions(calibration_set=str(set_path), fresh_judge=True), return_state=True
    )
    assert _final(bad)[:2] == ("FAILED", "Not calibrated")
    assert not verdict_result(bad).passed


def test_release_states(store_dir: Path, tmp_path: Path) -> None:
    trials = EXAMPLES / "release" / "trials.jsonl"
    state = release(ReleaseOptions(trials=str(trials)), return_state=True)
    report = verdict_result(state)
    kind, name, message = _final(state)
    assert (kind, name) == (
        ("COMPLETED", "Release ok") if report.passed else ("FAILED", "Release blocked")
    )
    if not report.passed:
        assert "stopped at" in message
    # A trial that claims completion but failed its outcome: false success stops the release.
    lines = trials.read_text().splitlines()
    blocked_trials = tmp_path / "false-success.jsonl"
    blocked_trials.write_text(
        "\n".join(line.replace('"outcome": "verified"', '"outcome": "failed"') for line in lines)
    )
    blocked = release(ReleaseOptions(trials=str(blocked_trials)), return_state=True)
    assert _final(blocked)[:2] == ("FAILED", "Release blocked")
    assert "stopped at" in _final(blocked)[2]


def test_nightly_states_and_sub_run_names(store_dir: Path) -> None:
    def job(version: str) -> NightlyJob:
        outputs = str(EXAMPLES / "outputs" / f"support-bot-{version}.jsonl")
        return NightlyJob(suite=SUITE, subject=f"agent:support-bot@{version}", outputs=outputs)

    good = nightly(NightlyOptions(jobs=[job("v1")]), return_state=True)
    assert _final(good)[:2] == ("COMPLETED", "All passed")
    mixed = nightly(NightlyOptions(jobs=[job("v1"), job("v2")]), return_state=True)
    kind, name, message = _final(mixed)
    assert (kind, name) == ("FAILED", "Some failed")
    assert "1 of 2 jobs did not pass" in message and "agent:support-bot@v2" in message
    with get_client(sync_client=True) as client:
        for outcome in verdict_result(mixed):
            sub = client.read_flow_run(UUID(outcome.run_id))
            assert sub.name == f"support-bot@1 · {outcome.subject}"
            assert f"subject:{outcome.subject}" in sub.tags
    tables = _artifacts(mixed)
    nightly_table = str(tables["assay-nightly"].data)
    assert "| regression |" in nightly_table and "no baseline" in nightly_table
    scorecard = json.loads(str(tables["assay-scorecard"].data))
    assert set(scorecard[0]) == {"subject", "suite", "runs", "latest pass rate", "trend / run"}
    assert "95% CI" in scorecard[0]["latest pass rate"]


@flow
def _heartbeat_frequency() -> int | None:
    return get_current_settings().flows.heartbeat_frequency


def test_flow_runs_started_in_this_process_send_no_prefect_heartbeat() -> None:
    """The CLI and `assay serve` run flows inside `in_this_process`: Prefect's heartbeat thread
    (joined at the end of every run, after up to a second's sleep) is off there, and only there."""
    from flows.local import in_this_process

    assert _heartbeat_frequency() is not None
    with in_this_process():
        assert _heartbeat_frequency() is None


@flow
def _client_of_the_run() -> Any:
    return get_client(sync_client=True)


def test_flow_runs_started_in_one_thread_share_one_open_prefect_client() -> None:
    """Prefect builds an API client for every flow run that finds none (each loads the CA
    bundle: 15–35 ms of a service's 10-case run); the runs a thread starts in this process
    share one, left open between them, and a run in another thread has its own."""
    import threading

    from flows.local import in_this_process

    clients = []
    for _ in range(2):
        with in_this_process():
            clients.append(_client_of_the_run())
    other: list[Any] = []

    def in_another_thread() -> None:
        with in_this_process():
            other.append(_client_of_the_run())

    thread = threading.Thread(target=in_another_thread)
    thread.start()
    thread.join()
    assert clients[0] is clients[1] and other[0] is not clients[0]
    assert clients[0].api_healthcheck() is None  # still open after both runs


def test_a_deployment_run_s_options_are_validated_with_their_bounds() -> None:
    """Prefect validates the flow's one parameter on every run: a deployment run's parameters
    (plain JSON) with `judge_repeats=1000` are refused, as the CLI and the service refuse them."""
    from prefect.exceptions import ParameterTypeError

    given = {"suite": "support-bot", "outputs": V1, "judge_repeats": 1000}
    with pytest.raises(ParameterTypeError, match=r"options\.judge_repeats: .*less than or equal"):
        suite_run_flow.validate_parameters({"options": given})
    with pytest.raises(ParameterTypeError, match=r"options\.max_judge_flip_rate"):
        gate_flow.validate_parameters(
            {"options": {**given, "judge_repeats": 3, "max_judge_flip_rate": 2}}
        )
    accepted = suite_run_flow.validate_parameters({"options": {**given, "judge_repeats": 15}})
    assert accepted["options"] == RunOptions(suite="support-bot", outputs=V1, judge_repeats=15)


@pytest.mark.parametrize("which", ["suite_run", "gate"])
def test_the_launcher_is_told_the_result_once_recorded_before_the_flow_publishes(
    which: str, store_dir: Path
) -> None:
    """`launch(..., recorded=)` (what the service answers a run's request with) gets the
    flow's result once, when it is in the store and before the run's report is written; the
    gate's listener gets its GateRun, not its suite-run subflow's EvalResult."""
    store = FileStore(store_dir)
    told: list[tuple[Any, bool, bool]] = []

    def listener(value: Any) -> None:
        run_id = value.result.run_id if isinstance(value, GateRun) else value.run_id
        told.append(
            (value, store.exists(report_key(run_id)), load_result(store, run_id).run_id == run_id)
        )

    options = (GateOptions if which == "gate" else RunOptions)(
        suite=SUITE, outputs=V1, subject="agent:told"
    )
    outcome = launch(options, which, recorded=listener)  # type: ignore[arg-type]
    assert len(told) == 1
    value, report_written, result_stored = told[0]
    assert value == outcome and isinstance(value, GateRun if which == "gate" else EvalResult)
    assert result_stored and not report_written
    run_id = outcome.result.run_id if isinstance(outcome, GateRun) else outcome.run_id
    assert store.exists(report_key(run_id))  # the flow went on to publish it


@pytest.mark.parametrize("which", ["suite_run", "gate"])
def test_launched_flow_runs_carry_the_tags_and_their_task_runs_none(
    which: str, store_dir: Path
) -> None:
    """Prefect asks its API for concurrency slots before every tagged task run (a lease written
    to its database, which on SQLite collides with concurrent runs' writes and costs 2 s of
    back-off), so the launcher's tags go on the flow runs — the gate's suite-run subflow too —
    and none on the task runs they run."""
    options = (GateOptions if which == "gate" else RunOptions)(
        suite=SUITE, outputs=V1, subject="agent:tagged"
    )
    outcome = launch(options, which, labels=("ci-nightly",))  # type: ignore[arg-type]
    run_id = outcome.result.run_id if isinstance(outcome, GateRun) else outcome.run_id
    with get_client(sync_client=True) as client:
        suite_flow_run = client.read_flow_run(UUID(run_id))
        flow_runs = [suite_flow_run]
        if suite_flow_run.parent_task_run_id is not None:
            parent = client.read_task_run(suite_flow_run.parent_task_run_id)
            flow_runs.append(client.read_flow_run(parent.flow_run_id))  # type: ignore[arg-type]
        task_runs = client.read_task_runs(
            flow_run_filter=FlowRunFilter(id={"any_": [run.id for run in flow_runs]})
        )
    assert len(flow_runs) == (2 if which == "gate" else 1)
    for run in flow_runs:
        assert {"assay", "ci-nightly", "suite:support-bot", "subject:agent:tagged"} <= set(run.tags)
    tasks = [run for run in task_runs if run.id != suite_flow_run.parent_task_run_id]
    assert len(tasks) >= 8  # the subflow's own stand-in task run is not a task: it keeps them
    assert [run.tags for run in tasks if run.tags] == []
