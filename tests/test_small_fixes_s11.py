"""Small fixes of session 11, each with the test that failed before it.

1. The pull-request comment's report link carries the run's link key: a reviewer's browser (no
   token) opens that report from the posted comment, and the key opens no other run's report —
   whether the gate ran through `assay serve` or in this process with `--report-url`.
2. `assay report RUN --against OTHER --cross-suite` compares with a run of another suite.
3. `assay view` and `assay report` name a run that cannot be a store key in one line, exit 2.
4. Metrics reloaded from a stored EvalResult compare with the run's own mean score.
5. The gate reads its judge's admission through `judge_admission`, the one fingerprint rule.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import typer
from typer.testing import CliRunner

from assay.cli import _common as common
from assay.cli import app
from assay.cli._run_flags import flag
from assay.runs.comparison import compare_with_baseline
from assay.runs.options import RunOptions
from assay.runs.records import load_aggregate, load_result
from assay.store import FileStore
from tests.api_service import start_service
from tests.conftest import EXAMPLES
from tests.github_server import PULL_REQUEST, REPOSITORY, FakeGitHub, fake_github
from tests.launched import suite_run
from tests.test_github_comment import SUBJECT, _outputs, _post, _suite

__all__ = ["fake_github"]

ROOT = Path(__file__).resolve().parent.parent
SUITE = str(EXAMPLES / "support-suite.yaml")
OTHER_SUITE = str(EXAMPLES / "conversation-suite.yaml")
CROSS_LINE = (
    "cross-suite: the baseline is a run of suite support-conversations, this run of support-bot"
)


def _gate(runner: CliRunner, suite: str, outputs: str, comment: Path, *extra: str) -> str:
    done = runner.invoke(
        app,
        [
            *("gate", suite, "--outputs", outputs, "--subject", SUBJECT),
            *("--comment", str(comment), "--json", *extra),
        ],
    )
    assert done.exit_code in (0, 1), done.output
    return str(json.loads(done.stdout)["run_id"])


def _posted_link(fake_github: FakeGitHub) -> str:
    (comment,) = fake_github.comments[(REPOSITORY, PULL_REQUEST)]
    found = re.search(r"\[Full report\]\((\S+)\)", comment["body"])
    assert found is not None, comment["body"]
    return found.group(1)


def test_the_posted_report_link_opens_that_report_without_a_token_and_no_other(
    tmp_path: Path, prefect_api: str, fake_github: FakeGitHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = start_service(tmp_path / "serve", prefect_api_url=prefect_api)
    try:
        runner = CliRunner()
        suite = _suite(tmp_path)
        here, through = tmp_path / "here.md", tmp_path / "through.md"
        # In this process, on the service's store, naming the service's URL.
        first = _gate(
            runner,
            suite,
            _outputs(tmp_path, "v1", set(range(4, 40))),
            here,
            *("--local", "--store", FileStore(service.store_dir).uri),
            *("--report-url", service.url),
        )
        _post(runner, here)
        link_here = _posted_link(fake_github)
        # Through the service, as CI with ASSAY_URL does.
        monkeypatch.setenv("ASSAY_URL", service.url)
        monkeypatch.setenv("ASSAY_TOKEN", service.tokens["operator"])
        second = _gate(
            runner,
            suite,
            _outputs(tmp_path, "v2", set(range(10, 40))),
            through,
            "--baseline",
            first,
        )
        _post(runner, through)
        link_through = _posted_link(fake_github)
        with httpx.Client(trust_env=False, timeout=120) as browser:
            opened = {link: browser.get(link) for link in (link_here, link_through)}
            crossed = [
                browser.get(link_here.replace(first, second)),
                browser.get(link_through.replace(second, first)),
            ]
    finally:
        service.stop()
    for (link, page), run_id in zip(opened.items(), (first, second), strict=True):
        assert page.status_code == 200, (link, page.text[:300])
        assert link.startswith(f"{service.url}/runs/{run_id}/report?key="), link
        assert page.headers["content-type"].startswith("text/html") and run_id in page.text
    assert [page.status_code for page in crossed] == [401, 401]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Iterator[dict[str, str]]:
    """A store with support-bot v1, v2 (its baseline v1) and a run of another suite."""
    store = FileStore(tmp_path_factory.mktemp("s11-runs") / "store")
    v1 = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
    v2 = str(EXAMPLES / "outputs" / "support-bot-v2.jsonl")
    first = suite_run(suite=SUITE, outputs=v1, subject="agent:support-bot@v1", store=store.uri)
    second = suite_run(
        suite=SUITE,
        outputs=v2,
        subject="agent:support-bot@v2",
        store=store.uri,
        baseline=first.run_id,
    )
    other = suite_run(
        suite=OTHER_SUITE,
        outputs=str(EXAMPLES / "outputs" / "conversation-v1.jsonl"),
        subject="agent:support-bot@v1",
        store=store.uri,
    )
    yield {"store": store.uri, "v1": first.run_id, "v2": second.run_id, "other": other.run_id}


def test_report_against_a_run_of_another_suite_needs_cross_suite_and_then_says_so(
    runs: dict[str, str], tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    report = ["report", runs["v2"][:8], "--against", runs["other"][:8], "--store", runs["store"]]
    refused = CliRunner().invoke(app, [*report, "-o", str(page)])
    assert refused.exit_code == 2, refused.output
    (line,) = refused.output.strip().splitlines()
    assert line.startswith("error: ") and "--cross-suite" in line, line
    assert not page.exists()

    done = CliRunner().invoke(app, [*report, "--cross-suite", "-o", str(page)])
    assert done.exit_code == 0, done.output
    assert CROSS_LINE in page.read_text()

    alone = CliRunner().invoke(app, ["report", runs["v2"], "--cross-suite"])
    assert alone.exit_code == 2 and "--against" in alone.output, alone.output


def test_report_s_cross_suite_flag_reads_as_the_run_flag() -> None:
    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    ctx = command.make_context("assay", ["report", "--help"], resilient_parsing=True)

    def help_of(name: str) -> str | None:
        loaded = command.get_command(ctx, name)
        assert loaded is not None
        (option,) = [p for p in loaded.params if flag("cross_suite") in p.opts]
        return getattr(option, "help", None)

    expected = common.flag_help(RunOptions.model_fields["cross_suite"].description or "")
    assert help_of("report") == help_of("run") == expected


@pytest.mark.parametrize(
    "command",
    [
        ["view", "../../etc/passwd", "--outputs", "x.jsonl"],
        ["report", "../../etc/passwd"],
    ],
)
def test_a_run_that_cannot_be_a_store_key_is_one_line_and_exit_2(
    command: list[str], tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "assay.cli", *command, "--store", f"file://{tmp_path / 's'}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "../../etc/passwd" in line, line


def test_reloaded_metrics_compare_with_the_run_s_own_mean_score(runs: dict[str, str]) -> None:
    store = FileStore(Path(runs["store"].removeprefix("file://")))
    recorded = load_result(store, runs["v2"])
    baseline = load_result(store, runs["v1"])
    assert recorded.regression is not None and recorded.score is not None
    assert baseline.score is not None
    again = compare_with_baseline(
        store, load_aggregate(store, runs["v2"]), recorded.metrics, 0.05, runs["v1"]
    )
    # The figure the run recorded when it compared its live tally (score sum and all).
    assert recorded.regression.score_drop is not None
    assert again.score_drop == pytest.approx(recorded.regression.score_drop, abs=1e-12)
    assert again.score_drop == pytest.approx(baseline.score - recorded.score, abs=1e-12)
    stored = json.loads(store.get(f"runs/{runs['v2']}/result.json"))
    assert "score_sum" not in stored["metrics"]  # records keep their bytes


def test_the_gate_builds_no_admission_fingerprint_of_its_own() -> None:
    tree = ast.parse((ROOT / "assay" / "gate" / "decision.py").read_text())
    named = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    assert "judge_admission" in named
    # Only the admission package builds a run judge's fingerprint (`judge_admission`).
    for module in (ROOT / "assay").rglob("*.py"):
        if module.parent.name == "admission":
            continue
        tree = ast.parse(module.read_text())
        named = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        assert not {"Fingerprint", "load_battery"} <= named, module
