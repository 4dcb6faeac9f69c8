"""Regression through real runs of the flow: regressed, inconclusive noise, paired analysis,
findings, the `finding.reported` event and a notification delivered to a local webhook."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from assay.findings import list_findings
from assay.regression import RegressionStatus
from assay.store import FileStore
from blocks import NotificationTarget
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")


def _suite(tmp_path: Path, cases: int, name: str = "reg") -> str:
    suite = {
        "suite": name,
        "regression_threshold": 0.05,
        "cases": [
            {"id": f"c{i:03d}", "input": "q", "scorers": ["json_valid"]} for i in range(cases)
        ],
    }
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(suite))
    return str(path)


def _outputs(tmp_path: Path, name: str, cases: int, failing: set[int]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:03d}", "output": "oops" if i in failing else "{}"}) + "\n"
            for i in range(cases)
        )
    )
    return str(path)


def _reported_events(run_id: str) -> list[dict[str, object]]:
    """`finding.reported` events about `run_id`, read back from the Prefect API's event store."""
    from prefect.settings import PREFECT_API_URL

    query = {"filter": {"event": {"name": ["finding.reported"]}}, "limit": 50}
    for _ in range(60):  # events are written asynchronously by the server
        request = urllib.request.Request(
            f"{PREFECT_API_URL.value()}/events/filter",
            data=json.dumps(query).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            events = json.loads(response.read())["events"]
        mine = [e for e in events if e["payload"].get("run_id") == run_id]
        if mine:
            return mine
        time.sleep(0.5)
    return []


class _Receiver(BaseHTTPRequestHandler):
    received: list[bytes] = []  # noqa: RUF012 - shared with the test on purpose

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        type(self).received.append(self.rfile.read(length))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[bytes]]]:
    """A local HTTP receiver; yields its URL and the bodies it received."""
    _Receiver.received = []
    server = HTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}/hook", _Receiver.received
    server.shutdown()


def test_a_real_drop_is_regressed_recorded_announced_and_notified(
    store_dir: Path, tmp_path: Path, webhook: tuple[str, list[bytes]]
) -> None:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    url, received = webhook
    CustomWebhookNotificationBlock(
        name="assay-test", url=url, json_data={"text": "{{subject}} | {{body}}"}
    ).save("assay-test-hook", overwrite=True)
    NotificationTarget(notification_block="custom-webhook/assay-test-hook").save(
        "assay-test-target", overwrite=True
    )
    suite = _suite(tmp_path, 100)
    before = suite_run(
        suite=suite, outputs=_outputs(tmp_path, "good", 100, set()), subject="agent:bot"
    )
    after = suite_run(
        suite=suite,
        outputs=_outputs(tmp_path, "bad", 100, set(range(0, 100, 3))),  # 34 now fail
        subject="agent:bot",
        notification_block="assay-test-target",
    )

    regression = after.regression
    assert regression is not None
    assert regression.status is RegressionStatus.REGRESSED
    assert (regression.baseline_run, regression.baseline_source) == (before.run_id, "automatic")
    assert (regression.baseline.passed, regression.baseline.scored) == (100, 100)  # type: ignore[union-attr]
    assert (regression.candidate.passed, regression.candidate.scored) == (66, 100)
    assert regression.score_drop == pytest.approx(0.34)
    assert regression.pass_rate_diff == pytest.approx(0.34)
    assert regression.interval is not None and regression.interval[0] > 0
    paired = regression.paired
    assert paired is not None
    assert (paired.both_pass, paired.baseline_only, paired.candidate_only, paired.both_fail) == (
        66,
        34,
        0,
        0,
    )
    assert paired.mcnemar_p < 1e-9
    assert regression.changed == []

    (finding,) = list_findings(FileStore(store_dir), after.run_id)
    assert finding.kind == "eval_regression"
    assert _reported_events(after.run_id), "finding.reported reached the Prefect API"
    assert finding.details["baseline"] == {"passed": 100, "scored": 100}
    for _ in range(50):  # the webhook call is synchronous, but give the server thread a moment
        if received:
            break
        time.sleep(0.1)
    (message,) = received
    text = json.loads(message)["text"]
    assert "eval_regression" in text and "100/100 → 66/100" in text
    assert after.run_id in text


def test_a_small_sample_drop_is_inconclusive_noise_and_skipped_as_a_later_baseline(
    store_dir: Path, tmp_path: Path
) -> None:
    suite = _suite(tmp_path, 10, "noise")
    first = suite_run(suite=suite, outputs=_outputs(tmp_path, "a", 10, set()), subject="agent:n")
    noisy = suite_run(suite=suite, outputs=_outputs(tmp_path, "b", 10, {1, 2}), subject="agent:n")
    third = suite_run(suite=suite, outputs=_outputs(tmp_path, "c", 10, {1, 2}), subject="agent:n")

    assert noisy.regression is not None
    assert noisy.regression.status is RegressionStatus.INCONCLUSIVE_NOISE
    assert noisy.regression.score_drop == pytest.approx(0.2)  # above the 0.05 threshold...
    assert noisy.regression.interval is not None and noisy.regression.interval[0] < 0  # ...but
    assert list_findings(FileStore(store_dir), noisy.run_id) == []
    assert third.regression is not None
    assert third.regression.baseline_run == first.run_id  # the noise run is never a baseline


def test_changed_suite_version_is_reported_and_first_run_has_no_baseline(
    store_dir: Path, tmp_path: Path
) -> None:
    suite = _suite(tmp_path, 5, "changes")
    first = suite_run(suite=suite, outputs=_outputs(tmp_path, "x", 5, set()), subject="agent:c")
    document = json.loads(Path(suite).read_text())
    document["cases"][0]["scorers"] = [{"contains": "{"}]
    Path(suite).write_text(json.dumps(document))
    second = suite_run(suite=suite, outputs=_outputs(tmp_path, "x", 5, set()), subject="agent:c")

    assert first.regression is not None
    assert first.regression.status is RegressionStatus.NO_BASELINE
    assert second.regression is not None
    assert second.regression.status is RegressionStatus.NO_REGRESSION
    assert second.regression.changed == [
        "suite_version: 1 → 2",
        "scorer_set: +1 −0 configurations",
    ]


def test_scorecard_exports_csv_and_json_after_runs(store_dir: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    suite = _suite(tmp_path, 20, "card")
    for failing in (set(), {1}, {1, 2}, {1, 2, 3}):
        outputs = _outputs(tmp_path, f"o{len(failing)}", 20, failing)
        suite_run(suite=suite, outputs=outputs, subject="agent:card@v1")

    runner = CliRunner()
    as_json = runner.invoke(app, ["scorecard", "--subject", "agent:card", "--format", "json"])
    assert as_json.exit_code == 0, as_json.output
    (row,) = json.loads(as_json.stdout)
    assert (row["subject"], row["suite"], row["runs"]) == ("agent:card@v1", "card", 4)
    assert (row["latest_passed"], row["latest_scored"]) == (17, 20)
    assert (row["pooled_passed"], row["pooled_scored"]) == (74, 80)
    assert row["mean_pass_rate"] == pytest.approx((1 + 0.95 + 0.9 + 0.85) / 4)
    assert row["trend_slope"] == pytest.approx(-0.05)  # a perfect line: one case lost per run
    assert row["trend_lo"] == pytest.approx(-0.05) and row["trend_hi"] == pytest.approx(-0.05)

    as_csv = runner.invoke(app, ["scorecard", "--format", "csv"])
    header, line = as_csv.stdout.strip().splitlines()
    assert header.split(",")[:4] == ["subject", "suite", "runs", "latest_run"]
    assert line.startswith("agent:card@v1,card,4,")
    table = runner.invoke(app, ["scorecard"])
    assert "17/20" in table.output and "74/80" in table.output
