"""The nightly flow (isolated jobs) and configuration by saved blocks, on a real Prefect API."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)

from assay.runs.records import list_runs, load_result
from assay.store import FileStore
from blocks import EvidenceStorage, FinOpsBudget, JudgeSettings, NotificationTarget
from flows.nightly import NightlyJob, NightlyJobsFailedError, NightlyOptions, nightly
from tests import launched
from tests.conftest import EXAMPLES
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

SUITE = str(EXAMPLES / "support-suite.yaml")


@pytest.fixture
def budgets_forgotten() -> Iterator[None]:
    """Budgets these tests save are deleted afterwards: a saved budget applies to every later
    judged run of the session (and `budget show` lists it)."""
    yield
    for name in ("test-budget", "cli-budget"):
        with contextlib.suppress(ValueError):  # a test saves one of them
            FinOpsBudget.delete(name)  # type: ignore[attr-defined]


def _job(version: str, outputs: Path | None = None) -> NightlyJob:
    return NightlyJob(
        suite=SUITE,
        subject=f"agent:support-bot@{version}",
        outputs=str(outputs or EXAMPLES / "outputs" / f"support-bot-{version}.jsonl"),
    )


def test_nightly_runs_every_job_and_reports_each(store_dir: Path) -> None:
    outcomes = launched.flow("nightly", NightlyOptions(jobs=[_job("v1"), _job("v2")]))

    assert [(o.status, o.passed) for o in outcomes] == [("completed", True), ("completed", False)]
    store = FileStore(store_dir)
    assert {r.variant for r in list_runs(store)} == {"v1", "v2"}
    for outcome in outcomes:
        assert outcome.run_id is not None
        assert load_result(store, outcome.run_id).pass_rate == outcome.pass_rate


def test_one_failing_job_does_not_stop_the_others(store_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"case_id": "no-such-case", "output": "x"}\n')

    state = nightly(NightlyOptions(jobs=[_job("v1", broken), _job("v2")]), return_state=True)

    assert state.is_failed()
    with pytest.raises(NightlyJobsFailedError, match="1 of 2 nightly jobs failed"):
        state.result()
    runs = list_runs(FileStore(store_dir))
    assert [(r.variant, r.status) for r in runs] == [("v2", "completed")]
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["assay-nightly"]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id]),
            )
        )
    table = str(artifacts[0].data)
    assert "unknown case id 'no-such-case'" in table and "completed" in table


def test_suite_run_writes_to_the_store_named_by_a_saved_block(tmp_path: Path) -> None:
    root = tmp_path / "block-store"
    EvidenceStorage(url=f"file://{root}").save("test-local", overwrite=True)

    result = suite_run(
        suite=SUITE,
        outputs=str(EXAMPLES / "outputs" / "support-bot-v1.jsonl"),
        storage_block="test-local",
    )

    assert load_result(FileStore(root), result.run_id).metrics.passed == 45
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(UUID(result.run_id))
    assert run.parameters["options"]["storage_block"] == "test-local"


@pytest.mark.usefixtures("budgets_forgotten")
def test_blocks_round_trip_with_secrets_masked() -> None:
    from pydantic import SecretStr

    EvidenceStorage(
        url="s3://bucket/prefix",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="id",
        aws_secret_access_key=SecretStr("s3-secret-value"),
    ).save("test-s3", overwrite=True)
    JudgeSettings(model="judge-1", api_key=SecretStr("sk-test"), max_concurrency=8).save(
        "test-judge", overwrite=True
    )
    FinOpsBudget(limit_usd=25, period="week", mode="alert", scope="suite:refunds").save(
        "test-budget", overwrite=True
    )
    NotificationTarget(notification_block="custom-webhook/alerts").save(
        "test-notify", overwrite=True
    )

    storage = EvidenceStorage.load("test-s3")
    assert storage.aws_secret_access_key is not None
    assert storage.aws_secret_access_key.get_secret_value() == "s3-secret-value"
    assert "s3-secret-value" not in repr(storage)
    assert JudgeSettings.load("test-judge").max_concurrency == 8
    budget = FinOpsBudget.load("test-budget")
    assert (budget.limit_usd, budget.period, budget.mode) == (25, "week", "alert")
    with pytest.raises(ValueError, match=r"unsupported scheme .ftp. for an evidence store"):
        EvidenceStorage(url="ftp://nope")


@pytest.mark.usefixtures("budgets_forgotten")
def test_cli_saves_storage_and_budget_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    runner = CliRunner()
    monkeypatch.setenv("ASSAY_SECRET_ACCESS_KEY", "from-the-environment")
    saved = runner.invoke(
        app,
        ["store", "save", "cli-s3", "--url", "s3://b/p", "--endpoint-url", "http://127.0.0.1:9"],
    )
    assert saved.exit_code == 0, saved.output
    storage = EvidenceStorage.load("cli-s3")
    assert storage.aws_secret_access_key is not None
    assert storage.aws_secret_access_key.get_secret_value() == "from-the-environment"
    assert storage.endpoint_url == "http://127.0.0.1:9"

    budget = runner.invoke(
        app, ["budget", "set", "cli-budget", "--limit-usd", "12.5", "--mode", "throttle"]
    )
    assert budget.exit_code == 0, budget.output
    loaded = FinOpsBudget.load("cli-budget")
    assert (loaded.limit_usd, loaded.period, loaded.mode, loaded.scope) == (
        12.5,
        "month",
        "throttle",
        "*",
    )

    bad_mode = runner.invoke(app, ["budget", "set", "x", "--limit-usd", "1", "--mode", "shout"])
    assert bad_mode.exit_code == 2 and "mode" in bad_mode.output
    bad_name = runner.invoke(app, ["store", "save", "Bad Name", "--url", "file://x"])
    assert bad_name.exit_code == 2 and "lowercase" in bad_name.output
    bad_url = runner.invoke(app, ["store", "save", "ok", "--url", "ftp://x"])
    assert bad_url.exit_code == 2
    assert "unsupported scheme 'ftp' for an evidence store (use file://PATH or s3://" in (
        bad_url.output
    )
