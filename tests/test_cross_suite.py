"""A baseline of another suite is refused unless the run opts in (`--cross-suite`, `cross_suite`),
and the comparison then states both suites — in `--json`, the summary, the report and the PR
comment; a baseline of another *version* of the same suite needs no opt-in and says what changed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from assay.cli import app
from assay.client import AssayClient
from assay.regression import RegressionStatus
from assay.runs.records import EvalResult
from tests.api_service import Service, example_outputs, example_suite, start_service
from tests.conftest import EXAMPLES
from tests.launched import suite_run

SUITE = str(EXAMPLES / "support-suite.yaml")
V2 = str(EXAMPLES / "outputs" / "support-bot-v2.jsonl")
OTHER_SUITE = str(EXAMPLES / "conversation-suite.yaml")
OTHER_OUTPUTS = str(EXAMPLES / "outputs" / "conversation-v1.jsonl")
STATED = {"baseline_suite": "support-conversations", "candidate_suite": "support-bot"}
LINE = "cross-suite: the baseline is a run of suite support-conversations, this run of support-bot"


def _other_suite_run() -> str:
    return suite_run(
        suite=OTHER_SUITE, outputs=OTHER_OUTPUTS, subject="agent:support-bot@v1"
    ).run_id


@pytest.mark.usefixtures("prefect_api")
def test_a_gate_on_a_baseline_of_another_suite_exits_2_unless_cross_suite_and_then_says_so(
    store_dir: Path, tmp_path: Path
) -> None:
    other = _other_suite_run()
    gate = ["gate", SUITE, "--outputs", V2, "--baseline", other[:8], "--local"]

    refused = CliRunner().invoke(app, gate)
    assert refused.exit_code == 2, refused.output
    (line,) = refused.output.strip().splitlines()
    assert "support-conversations" in line and "support-bot" in line and "--cross-suite" in line

    comment = tmp_path / "comment.md"
    done = CliRunner().invoke(app, [*gate, "--cross-suite", "--json", "--comment", str(comment)])
    assert done.exit_code in (0, 1), done.output
    gated = json.loads(done.stdout)
    regression = gated["result"]["regression"]
    assert regression["baseline_run"] == other and regression["cross_suite"] == STATED
    assert "suite: support-conversations@1 → support-bot@1" in regression["changed"]
    assert LINE in comment.read_text()

    run_id = gated["result"]["run_id"]
    shown = CliRunner().invoke(app, ["runs", "show", run_id[:8]], env={"COLUMNS": "400"})
    assert shown.exit_code == 0 and LINE in shown.output, shown.output
    page = tmp_path / "report.html"
    reported = CliRunner().invoke(app, ["report", run_id[:8], "-o", str(page)])
    assert reported.exit_code == 0, reported.output
    assert LINE in page.read_text()


@pytest.mark.usefixtures("prefect_api")
def test_a_baseline_of_another_version_of_the_suite_needs_no_opt_in_and_says_what_changed(
    store_dir: Path, tmp_path: Path
) -> None:
    document = yaml.safe_load(Path(SUITE).read_text())
    suite = tmp_path / "support-suite.yaml"
    suite.write_text(yaml.safe_dump(document))
    first = suite_run(suite=str(suite), outputs=V2, subject="agent:support-bot@v1")
    document["cases"][0]["scorers"].append({"contains": "a"})
    suite.write_text(yaml.safe_dump(document))

    second = suite_run(
        suite=str(suite), outputs=V2, subject="agent:support-bot@v2", baseline=first.run_id[:8]
    )
    regression = second.regression
    assert regression is not None and regression.baseline_run == first.run_id
    assert regression.status is not RegressionStatus.NO_BASELINE
    assert regression.cross_suite is None
    assert "cross_suite" not in regression.model_dump(mode="json")  # records keep their bytes
    assert regression.changed[0] == "suite_version: 1 → 2"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Iterator[Service]:
    running = start_service(tmp_path_factory.mktemp("cross-suite"), prefect_api_url=prefect_api)
    other: dict[str, Any] = {
        "suite": "other-suite",
        "cases": [
            {"id": f"o{i}", "input": "q", "scorers": [{"contains": "yes"}]} for i in range(5)
        ],
    }
    with running.client("operator") as client:
        for document in (example_suite(), other):
            published = client.post("/suites", json=document)
            assert published.status_code == 201, published.text
    try:
        yield running
    finally:
        running.stop()


def test_the_service_refuses_another_suite_s_baseline_with_422_unless_cross_suite(
    service: Service,
) -> None:
    outputs = [{"case_id": f"o{i}", "output": "yes"} for i in range(5)]
    with service.client("operator") as client:
        ran = client.post(
            "/runs", json={"suite": "other-suite", "subject": "agent:bot@v1", "outputs": outputs}
        )
        assert ran.status_code == 201, ran.text
        other = ran.json()["run_id"]
        body = {
            "suite": "support-bot",
            "subject": "agent:bot@v2",
            "outputs": example_outputs("v2"),
            "baseline": other[:8],
        }
        for route in ("/runs", "/gate"):
            refused = client.post(route, json=body)
            assert refused.status_code == 422, refused.text
            detail = refused.json()["detail"]
            assert "other-suite" in detail and "support-bot" in detail, detail

    with AssayClient(service.url, token=service.tokens["operator"]) as assay:
        result = assay.run("support-bot", subject="agent:bot@v2", **body_options(body))
    assert isinstance(result, EvalResult)
    assert result.regression is not None and result.regression.baseline_run == other
    assert result.regression.cross_suite is not None
    assert result.regression.cross_suite.model_dump() == {
        "baseline_suite": "other-suite",
        "candidate_suite": "support-bot",
    }


def body_options(body: dict[str, Any]) -> dict[str, Any]:
    """The request's outputs and baseline, with the opt-in, as `AssayClient.run` takes them."""
    return {"outputs": body["outputs"], "baseline": body["baseline"], "cross_suite": True}
