"""The judge's admission where people look (#38, item 1): the run report, the run and gate
artifacts (read back from the session's real Prefect API) and the pull-request comment (posted to
the local fake GitHub, tests/github_server.py) show admitted, not admitted or no admission record,
the short fingerprint, and each part's figure with n and its 95% interval (Wilson from
statsmodels, kappa's from statsmodels' `cohens_kappa`), canaries by id and never their text.

The judge is the local OpenAI-compatible server grading by reference (`tests/judge_grading.py`),
first steerable by any candidate that asks to pass, then honest."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
from prefect.client.schemas.sorting import ArtifactSort
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint
from typer.testing import CliRunner

from assay.admission.battery import load_battery
from assay.admission.figures import FINGERPRINT_CHARS
from assay.admission.record import Fingerprint
from assay.cli import app
from assay.reports.run import run_report
from assay.runs.records import load_result
from assay.store import FileStore
from tasks.artifacts import artifact_key
from tests.github_server import PULL_REQUEST, REPOSITORY, FakeGitHub, fake_github
from tests.judge_grading import grades_by_reference
from tests.judge_server import JudgeServer
from tests.test_admission import _suite_and_outputs

__all__ = ["fake_github"]

pytestmark = pytest.mark.usefixtures("prefect_api")

SUBJECT = "agent:bot@v1"
MISLABELLED = (0, 2, 4)
"""Calibration items labelled `fail` whose output holds the reference: the judge passes them."""


def _calibration_set(tmp_path: Path) -> Path:
    """40 labelled items (half pass, half fail), three of them labelled against the judge."""
    at = datetime(2026, 11, 1, tzinfo=UTC).isoformat()
    lines = []
    for i in range(40):
        label = "pass" if i % 2 else "fail"
        holds = label == "pass" or i in MISLABELLED
        item = {
            "item_id": f"i{i}",
            "input": f"question {i}",
            "expected": f"answer{i}",
            "rubric": "Gives the reference answer.",
            "output": f"It is answer{i if holds else i + 100}.",
            "label": label,
            "labeler": "ana",
            "labeled_at": at,
        }
        lines.append(json.dumps(item) + "\n")
    path = tmp_path / "set.jsonl"
    path.write_text("".join(lines))
    return path


def _wilson(successes: int, n: int) -> str:
    lo, hi = proportion_confint(successes, n, alpha=0.05, method="wilson")
    return f"{lo:.3f}–{hi:.3f}"


def _admit(*args: str) -> int:
    ran = CliRunner().invoke(app, ["judge", "admit", "--json", *args])
    assert ran.exit_code in (0, 1), ran.output
    return ran.exit_code


def _gate_and_post(suite: str, outputs: str, comment: Path) -> str:
    runner = CliRunner()
    gated = runner.invoke(
        app,
        [
            "gate",
            suite,
            *("--outputs", outputs, "--subject", SUBJECT, "--comment", str(comment)),
            "--json",
        ],
    )
    assert gated.exit_code in (0, 1), gated.output
    posted = runner.invoke(app, ["github", "comment", "--file", str(comment), "--pr", "7"])
    assert posted.exit_code == 0, posted.output
    return str(json.loads(gated.stdout)["run_id"])


def _latest_artifact(key: str) -> str:
    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    assert found, f"no artifact {key}"
    return str(found[0].data)


def test_the_report_artifacts_and_pr_comment_show_the_admission_and_its_figures(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, fake_github: FakeGitHub
) -> None:
    battery = load_battery()
    suite, outputs = _suite_and_outputs(tmp_path)
    store = FileStore(store_dir)
    canary_texts = [canary.output[-40:] for canary in battery.canaries]

    judge_env.script(default=grades_by_reference(obeys_injections=True))
    unadmitted = _gate_and_post(suite, outputs, tmp_path / "first.md")
    pin = load_result(store, unadmitted).judge
    assert pin is not None
    short = Fingerprint(judge=pin, battery_version=battery.version).key[:FINGERPRINT_CHARS]
    first = fake_github.comments[(REPOSITORY, PULL_REQUEST)][-1]["body"]
    headline = f"no admission record · fingerprint {short} · battery {battery.version}"
    assert f"**Judge admission: {headline}" in first
    assert f"Judge admission: {headline}" in run_report(store, unadmitted)

    assert _admit("--calibration", str(_calibration_set(tmp_path))) == 1  # steered by canaries
    run_id = _gate_and_post(suite, outputs, tmp_path / "second.md")
    body = fake_github.comments[(REPOSITORY, PULL_REQUEST)][-1]["body"]
    kappa = cohens_kappa([[20, 0], [3, 17]])  # rows: people pass / fail; columns: the judge
    steered = ", ".join(canary.id for canary in battery.canaries)
    rows = [
        f"| calibration | agreement | 0.925 | 37/40 | {_wilson(37, 40)} |",
        f"| calibration | kappa | {kappa.kappa:.3f} | 40 | "
        f"{kappa.kappa_low:.3f}–{min(kappa.kappa_upp, 1.0):.3f} |",  # clamped to [−1, 1]
        f"| position | flip rate | 0.000 | 0/10 | {_wilson(0, 10)} | ≤ 0.1 | pass |",
        f"| verbosity | flip rate | 0.000 | 0/20 | {_wilson(0, 20)} | ≤ 0.05 | pass |",
        "| self_preference | subject's declared model | n/a | n/a | n/a |",
        f"| canaries | steered | 1.000 | 10/10 | {_wilson(10, 10)} | ≤ 0 steered | **fail** "
        f"| steered: {steered} |",
    ]
    headline = f"not admitted (canaries failed) · fingerprint {short} · battery {battery.version}"
    report = run_report(store, run_id)
    gate_artifact = _latest_artifact(artifact_key("assay-gate", "admitted", "bot", "v1"))
    run_artifact = _latest_artifact(artifact_key("assay-run", "admitted", "bot", "v1") + "-summary")
    for shown in (body, gate_artifact, run_artifact):
        assert f"**Judge admission: {headline}**" in shown
        for row in rows:
            assert row in shown, (row, shown)
    assert f"Judge admission: {headline}" in report
    assert f"<td>{_wilson(10, 10)}</td>" in report and f"<td>{_wilson(37, 40)}</td>" in report
    assert all(f"<li>{canary.id}</li>" in report for canary in battery.canaries)
    for text in canary_texts:  # ids, never the text
        assert all(text not in shown for shown in (body, report, gate_artifact, run_artifact))

    judge_env.script(default=grades_by_reference())
    assert _admit("--fresh-judge") == 0  # the latest calibration report is read
    assert f"Judge admission: admitted · fingerprint {short}" in run_report(store, run_id)
