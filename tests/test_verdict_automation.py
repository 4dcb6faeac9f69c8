"""Negative verdicts on a lasting `prefect server start`: the demo's v2 run is a FAILED state
named `Regressed` (v1 COMPLETED `Passed`), a failed gate FAILED `Gate failed`, the CLI's exit
codes unchanged — and the automation docs/prefect-ui.md shows (an EventTrigger on the
`Regressed` state + SendNotification to a notification block) posts to its webhook.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.conftest import EXAMPLES
from tests.prefect_server import BIN, REPO, api_call
from tests.test_regression_flow import webhook

__all__ = ["webhook"]  # the fixture, imported for use here

POST_WITHIN_SECONDS = 90.0
"""The triggers service acts on events it reads from the server's event stream, in batches."""


def _create_automation(api: str, url: str) -> None:
    """The automation of docs/prefect-ui.md, against the server at `api`."""
    from prefect.automations import Automation, EventTrigger, Posture, SendNotification
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api}):
        block_id = CustomWebhookNotificationBlock(
            name="assay", url=url, json_data={"text": "{{subject}} | {{body}}"}
        ).save("assay-regressions")
        Automation(
            name="assay: post on Regressed",
            trigger=EventTrigger(
                expect={"prefect.flow-run.Regressed"},
                match={"prefect.resource.id": "prefect.flow-run.*", "prefect.state-type": "FAILED"},
                posture=Posture.Reactive,
                threshold=1,
            ),
            actions=[
                SendNotification(
                    block_document_id=block_id,
                    subject="Assay: a run regressed",
                    body="{{ flow_run.name }}: {{ flow_run.state.message }}",
                )
            ],
        ).create()


def _assay(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "assay"), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )


def _states(api: str) -> dict[str, tuple[str, str]]:
    runs: list[dict[str, Any]] = api_call(api, "/flow_runs/filter", {"limit": 50})
    return {run["name"]: (run["state"]["type"], run["state"]["name"]) for run in runs}


def test_negative_verdicts_are_failed_states_that_automations_post(
    prefect_server: dict[str, str], tmp_path: Path, webhook: tuple[str, list[bytes]]
) -> None:
    api = prefect_server["PREFECT_API_URL"]
    url, received = webhook
    _create_automation(api, url)
    env = prefect_server | {"ASSAY_STORE": f"file://{tmp_path / 'store'}"}

    demo = _assay(env, "demo")
    assert demo.returncode == 0, demo.stderr[-2000:]
    states = _states(api)
    assert states["support-bot@1 · agent:support-bot@v1"] == ("COMPLETED", "Passed")
    assert states["support-bot@1 · agent:support-bot@v2"] == ("FAILED", "Regressed")

    deadline = time.monotonic() + POST_WITHIN_SECONDS
    while not received and time.monotonic() < deadline:
        time.sleep(1)
    assert received, "the automation did not post on Regressed"
    posted = json.loads(received[0])["text"]
    assert posted.startswith("Assay: a run regressed | support-bot@1 · agent:support-bot@v2: ")
    assert "down from 45/50 in baseline" in posted

    suite = str(EXAMPLES / "support-suite.yaml")
    v2 = str(EXAMPLES / "outputs" / "support-bot-v2.jsonl")
    gate = _assay(env, "gate", suite, "--outputs", v2, "--subject", "agent:support-bot@v3")
    assert gate.returncode == 1, gate.stderr[-2000:]  # the gate's exit code is unchanged
    assert _states(api)["gate · support-bot@1 · agent:support-bot@v3"] == ("FAILED", "Gate failed")
    assert len(received) == 1  # `Not passed` and `Gate failed` are not `Regressed`
