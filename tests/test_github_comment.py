"""The gate's pull-request comment: written by `assay gate --comment`, posted by `assay github
comment` to a local fake of GitHub's REST API (tests/github_server.py, a real HTTP server),
created once and updated in place on the next gate, found across pages of other comments,
refusals as one line; its figures checked against scipy/statsmodels; no output text; and the
composite action at the repository root."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint
from typer.testing import CliRunner

from assay.cli import app
from assay.gate.comment import FLIPS_SHOWN, comment_marker, gate_marker
from tests.github_server import PULL_REQUEST, REPOSITORY, TOKEN, FakeGitHub, fake_github

__all__ = ["fake_github"]

ROOT = Path(__file__).resolve().parent.parent
CASES = 40
CANARY = "CANARY-pr-comment-5d1e-never-posted"
SUITE = "pr-bot"
SUBJECT = "agent:bot"


def _suite(tmp_path: Path) -> str:
    path = tmp_path / "suite.yaml"
    cases = [
        {"id": f"c{i:02d}", "input": f"question {i}", "scorers": [{"contains": "ok"}]}
        for i in range(CASES)
    ]
    suite = {"suite": SUITE, "pass_threshold": 0.6, "regression_threshold": 0.05, "cases": cases}
    path.write_text(yaml.safe_dump(suite))
    return str(path)


def _outputs(tmp_path: Path, name: str, passing: set[int]) -> str:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {"case_id": f"c{i:02d}", "output": f"{'ok' if i in passing else 'no'} {CANARY}"}
            )
            + "\n"
            for i in range(CASES)
        )
    )
    return str(path)


def _gate(runner: CliRunner, suite: str, outputs: str, comment: Path, *extra: str) -> str:
    result = runner.invoke(
        app,
        [
            *("gate", suite, "--outputs", outputs, "--subject", SUBJECT),
            *("--comment", str(comment), "--json", *extra),
        ],
    )
    assert result.exit_code in (0, 1), result.output
    return str(json.loads(result.stdout)["run_id"])


def _post(runner: CliRunner, comment: Path) -> str:
    result = runner.invoke(app, ["github", "comment", "--file", str(comment), "--pr", "7"])
    assert result.exit_code == 0, result.output
    return result.stdout


def _wilson(passed: int, n: int) -> str:
    lo, hi = proportion_confint(passed, n, alpha=0.05, method="wilson")
    return f"{lo:.3f}–{hi:.3f}"


@pytest.mark.usefixtures("prefect_api", "store_dir")
def test_the_comment_is_posted_once_then_updated_in_place_and_holds_no_output_text(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    runner = CliRunner()
    suite = _suite(tmp_path)
    v1 = _outputs(tmp_path, "v1", set(range(4, CASES)))  # 36/40
    v2 = _outputs(tmp_path, "v2", {0, 1, *range(30, CASES)})  # 12/40: 26 now fail, 2 now pass
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    fake_github.add_comment(REPOSITORY, PULL_REQUEST, "LGTM", user="reviewer")

    v1_run = _gate(runner, suite, v1, first)
    assert "created comment" in _post(runner, first)
    v2_run = _gate(
        runner, suite, v2, second, "--baseline", v1_run, "--report-url", "http://svc:8000/"
    )
    assert "updated comment" in _post(runner, second)

    writes = fake_github.writes()
    assert [w.method for w in writes] == ["POST", "PATCH"]
    listed = fake_github.comments[(REPOSITORY, PULL_REQUEST)]
    assert [c["body"] for c in listed] == ["LGTM", second.read_text()]
    assert writes[1].path == f"/repos/{REPOSITORY}/issues/comments/{listed[1]['id']}"
    assert {r.authorization for r in fake_github.requests} == {f"Bearer {TOKEN}"}

    body = second.read_text()
    assert (
        body.splitlines()[0]
        == gate_marker(SUITE, SUBJECT)
        == f"<!-- assay-gate:{SUITE}:{SUBJECT} -->"
    )
    assert "❌ Assay gate failed" in body and "- **regressed**:" in body
    assert "- **pass_rate_below_threshold**:" in body and "- **coverage**" not in body
    assert f"| head | `{v2_run}` | 0.300 | 12/40 | {_wilson(12, 40)} |" in body
    assert f"| baseline | `{v1_run}` | 0.900 | 36/40 | {_wilson(36, 40)} |" in body
    # now fail: c04–c29 (26); now pass: c00, c01; both pass: c30–c39; both fail: c02, c03
    assert "| 26 | 2 | 10 | 2 |" in body
    reported = re.search(r"Exact McNemar p = (\S+)", body)
    assert reported is not None
    assert float(reported.group(1)) == pytest.approx(binomtest(26, 28, 0.5).pvalue, rel=5e-3)
    failing = ", ".join(f"`c{i:02d}`" for i in range(4, 4 + FLIPS_SHOWN))
    assert f"**Now failing (26):** {failing} … and 6 more" in body
    assert "**Now passing (2):** `c00`, `c01`" in body
    assert f"[Full report](http://svc:8000/runs/{v2_run}/report)" in body
    assert "Every rule passed" in first.read_text() and "No baseline" in first.read_text()
    assert "[Full report]" not in first.read_text()

    sent = json.dumps([r.body for r in fake_github.requests])
    assert CANARY not in body + first.read_text() + sent


def test_the_marked_comment_is_found_on_a_later_page(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    marker = gate_marker(SUITE, SUBJECT)
    for i in range(230):
        fake_github.add_comment(REPOSITORY, PULL_REQUEST, f"chatter {i}")
    other_gate = fake_github.add_comment(
        REPOSITORY, PULL_REQUEST, f"{gate_marker(SUITE, 'agent:other')}\nold"
    )
    fake_github.add_comment(REPOSITORY, PULL_REQUEST, "more chatter")
    ours = fake_github.add_comment(REPOSITORY, PULL_REQUEST, f"{marker}\nold")  # page 3
    comment = tmp_path / "c.md"
    comment.write_text(f"{marker}\nnew gate\n")

    out = _post(CliRunner(), comment)

    assert f"updated comment {ours}" in out
    pages = [r.query.get("page", ["1"])[0] for r in fake_github.requests if r.method == "GET"]
    assert pages == ["1", "2", "3"]
    assert fake_github.requests[0].query["per_page"] == ["100"]
    found = fake_github.find(ours)
    other = fake_github.find(other_gate)
    assert found is not None and found["body"] == f"{marker}\nnew gate\n"
    assert other is not None and other["body"].endswith("old")

    # a marker on no page: every page is read, then one new comment
    fresh = tmp_path / "fresh.md"
    fresh.write_text(f"{gate_marker('another-suite', SUBJECT)}\nfirst\n")
    fake_github.requests.clear()
    assert "created comment" in _post(CliRunner(), fresh)
    assert [r.method for r in fake_github.requests] == ["GET", "GET", "GET", "POST"]


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("bad-token", "GitHub answered 401 to GET /repos/acme/agent/issues/7/comments"),
        ("read-only", "GitHub answered 403 to POST /repos/acme/agent/issues/7/comments"),
        ("no-such-pr", "GitHub answered 404 to GET /repos/acme/agent/issues/8/comments"),
        ("down", "cannot reach the GitHub API at http://127.0.0.1:9"),
        ("no-marker", "the comment has no `<!-- assay-gate:… -->` marker"),
    ],
)
def test_refusals_are_one_line_and_exit_2(
    tmp_path: Path,
    fake_github: FakeGitHub,
    monkeypatch: pytest.MonkeyPatch,
    setup: str,
    expected: str,
) -> None:
    comment = tmp_path / "c.md"
    comment.write_text(
        "plain text\n" if setup == "no-marker" else f"{gate_marker(SUITE, SUBJECT)}\nx\n"
    )
    pr = "8" if setup == "no-such-pr" else "7"
    if setup == "bad-token":
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_wrong")
    if setup == "read-only":
        fake_github.read_only_tokens.add("ghs_read")
        monkeypatch.setenv("GITHUB_TOKEN", "ghs_read")
    if setup == "down":
        monkeypatch.setenv("GITHUB_API_URL", "http://127.0.0.1:9")

    result = CliRunner().invoke(app, ["github", "comment", "--file", str(comment), "--pr", pr])

    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], result.stderr
    assert fake_github.comments[(REPOSITORY, PULL_REQUEST)] == []


def test_action_yml_is_a_composite_action_with_exactly_the_documented_inputs() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    assert set(action["inputs"]) == {
        "suite",
        "outputs",
        "subject",
        "baseline",
        "comment",
        "server-url",
        "token",
    }
    assert action["inputs"]["comment"]["default"] in ("true", "false")
    steps = action["runs"]["steps"]
    assert all("shell" in step for step in steps if "run" in step)
    script = "\n".join(step.get("run", "") for step in steps)
    assert "assay gate" in script and "--comment" in script
    assert "assay github comment" in script


def test_no_suite_or_subject_name_can_end_the_marker_early() -> None:
    marker = gate_marker("evil-->suite", "agent:a b\n-->@v1")
    assert marker.count("-->") == 1 and marker.endswith(" -->") and "\n" not in marker
    assert comment_marker(f"intro\n{marker}\nbody") == marker
    assert comment_marker("<!-- assay-gate:x:y -->") != marker
