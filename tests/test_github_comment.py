"""The gate's pull-request comment: written by `assay gate --comment`, posted by `assay github
comment` to a local fake of GitHub's REST API (tests/github_server.py, a real HTTP server),
created once and updated in place on the next gate, found across pages of other comments,
refusals as one line; its figures checked against scipy/statsmodels; no output text; and the
composite action at the repository root.

The comment cannot hurt: a listing that paginates forever stops at its bound, a `next` link to
another origin is not followed (a second server sees nothing), a 429 or 5xx is retried as asked
and then one line, a 2xx of the wrong shape is one line, a comment the gate cannot write is a
warning beside its verdict's exit code, and the action's comment step cannot fail the job."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from scipy.stats import binomtest
from statsmodels.stats.proportion import proportion_confint
from typer.testing import CliRunner

from assay.cli import app
from assay.gate.comment import FLIPS_SHOWN, comment_marker, gate_marker
from assay.gate.github import (
    MAX_PAGES,
    MAX_RETRIES,
    MAX_RETRY_AFTER_SECONDS,
    PER_PAGE,
    RETRY_WAITS_SECONDS,
)
from tests.github_server import (
    PULL_REQUEST,
    REPOSITORY,
    TOKEN,
    Answer,
    FakeGitHub,
    fake_github,
    running_fake_github,
)

__all__ = ["fake_github"]

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PROCESS_TIMEOUT_SECONDS = 60
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
    assert re.search(
        rf"\[Full report\]\(http://svc:8000/runs/{v2_run}/report\?key=[0-9a-f]{{32}}\)", body
    )
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


def _assay_process(*args: str) -> subprocess.CompletedProcess[str]:
    """`assay ARGS` as its own process (the environment the fixtures set), ended after
    `PROCESS_TIMEOUT_SECONDS`: a client that never stops fails the test instead of hanging it."""
    return subprocess.run(
        [str(BIN / "assay"), *args],
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_SECONDS,
        check=False,
    )


def _marked(tmp_path: Path) -> Path:
    comment = tmp_path / "c.md"
    comment.write_text(f"{gate_marker(SUITE, SUBJECT)}\nx\n")
    return comment


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


def test_a_listing_that_paginates_forever_stops_at_the_page_bound_and_posts_nothing(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    fake_github.endless_listing = True

    done = _assay_process("github", "comment", "--file", str(_marked(tmp_path)), "--pr", "7")

    assert done.returncode == 2, done.stderr
    assert f"past {MAX_PAGES} pages" in _one_line(done.stderr)
    assert [r.method for r in fake_github.requests] == ["GET"] * MAX_PAGES
    assert fake_github.comments[(REPOSITORY, PULL_REQUEST)] == []


@pytest.mark.parametrize("elsewhere", ["a second server", "https", "another host name"])
def test_a_next_link_to_another_origin_is_not_followed_and_the_token_stays_home(
    tmp_path: Path, fake_github: FakeGitHub, elsewhere: str
) -> None:
    for i in range(PER_PAGE + 1):  # two pages
        fake_github.add_comment(REPOSITORY, PULL_REQUEST, f"chatter {i}")
    port = fake_github.url.rsplit(":", 1)[1]
    with running_fake_github((REPOSITORY, PULL_REQUEST)) as second:
        fake_github.next_link_origin = {
            "a second server": second.url,
            "https": f"https://127.0.0.1:{port}",
            "another host name": f"http://localhost:{port}",
        }[elsewhere]

        result = CliRunner().invoke(
            app, ["github", "comment", "--file", str(_marked(tmp_path)), "--pr", "7"]
        )

        assert second.requests == []
    assert result.exit_code == 2, result.output
    line = _one_line(result.stderr)
    assert "not followed" in line and fake_github.next_link_origin in line, line
    assert [r.method for r in fake_github.requests] == ["GET"]
    assert len(fake_github.comments[(REPOSITORY, PULL_REQUEST)]) == PER_PAGE + 1


def test_a_429_is_retried_after_the_wait_it_asks_for_then_the_comment_is_posted(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    fake_github.scripted["GET"] = [
        Answer(429, {"message": "API rate limit exceeded"}, {"Retry-After": "1"})
    ]
    started = time.monotonic()

    out = _post(CliRunner(), _marked(tmp_path))

    assert time.monotonic() - started >= 1.0
    assert "created comment" in out
    assert [r.method for r in fake_github.requests] == ["GET", "GET", "POST"]


def test_a_write_that_failed_after_taking_effect_is_found_on_retry_not_made_twice(
    tmp_path: Path, fake_github: FakeGitHub
) -> None:
    fake_github.scripted["POST"] = [
        Answer(502, {"message": "Server Error"}, {"Retry-After": "0"}, after_taking_effect=True)
    ]

    out = _post(CliRunner(), _marked(tmp_path))

    assert "updated comment" in out
    assert [r.method for r in fake_github.requests] == ["GET", "POST", "GET", "PATCH"]
    assert len(fake_github.comments[(REPOSITORY, PULL_REQUEST)]) == 1


@pytest.mark.parametrize(
    ("answers", "expected", "requests"),
    [
        (
            [Answer(500, {"message": "Server Error"}, {"Retry-After": "0"})] * (MAX_RETRIES + 1),
            f"still so after {MAX_RETRIES} retries",
            MAX_RETRIES + 1,
        ),
        (
            [Answer(429, {"message": "API rate limit exceeded"}, {"Retry-After": "3600"})],
            f"asked to wait 3,600 s, longer than the {MAX_RETRY_AFTER_SECONDS:.0f} s",
            1,
        ),
    ],
    ids=["5xx-every-time", "wait-beyond-the-cap"],
)
def test_a_github_that_stays_unavailable_is_one_line_after_bounded_retries(
    tmp_path: Path,
    fake_github: FakeGitHub,
    answers: list[Answer],
    expected: str,
    requests: int,
) -> None:
    fake_github.scripted["GET"] = list(answers)
    started = time.monotonic()

    result = CliRunner().invoke(
        app, ["github", "comment", "--file", str(_marked(tmp_path)), "--pr", "7"]
    )

    assert time.monotonic() - started < MAX_RETRY_AFTER_SECONDS
    assert result.exit_code == 2, result.output
    line = _one_line(result.stderr)
    assert "GitHub answered" in line and expected in line, line
    assert [r.method for r in fake_github.requests] == ["GET"] * requests


@pytest.mark.parametrize(
    ("method", "answer", "expected"),
    [
        (
            "GET",
            Answer(200, {"message": "hello"}),
            "200 to GET /repos/acme/agent/issues/7/comments",
        ),
        ("GET", Answer(200, [{"body": "no id"}]), "but not with a list of comments"),
        ("GET", Answer(200, [{"id": 5, "body": ["x"]}]), "but not with a list of comments"),
        ("GET", Answer(200, b"<html>maintenance</html>"), "but not with a list of comments"),
        ("POST", Answer(201, {"html_url": "https://x"}), "201 to POST"),
        ("POST", Answer(201, ["not", "a", "comment"]), "but not with a comment"),
    ],
    ids=["object", "no-id", "body-not-text", "not-json", "created-without-id", "created-list"],
)
def test_a_2xx_answer_of_the_wrong_shape_is_one_line_and_exit_2(
    tmp_path: Path, fake_github: FakeGitHub, method: str, answer: Answer, expected: str
) -> None:
    fake_github.scripted[method] = [answer]

    result = CliRunner().invoke(
        app, ["github", "comment", "--file", str(_marked(tmp_path)), "--pr", "7"]
    )

    assert result.exit_code == 2, result.output
    line = _one_line(result.stderr)
    assert line.startswith("error: GitHubError: GitHub answered 2") and expected in line, line


@pytest.mark.usefixtures("prefect_api", "store_dir")
@pytest.mark.parametrize(("passing", "exit_code"), [(set(range(CASES)), 0), (set(), 1)])
@pytest.mark.parametrize(
    ("flag", "what"), [("--comment", "pull-request comment"), ("--junit", "JUnit XML")]
)
def test_a_file_beside_the_verdict_that_cannot_be_written_warns_and_keeps_the_exit_code(
    tmp_path: Path, passing: set[int], exit_code: int, flag: str, what: str
) -> None:
    not_a_folder = tmp_path / "not-a-folder"
    not_a_folder.write_text("")
    target = not_a_folder / "gate-output"

    result = CliRunner().invoke(
        app,
        [
            *("gate", _suite(tmp_path), "--outputs", _outputs(tmp_path, "v", passing)),
            *("--subject", SUBJECT, flag, str(target), "--json"),
        ],
    )

    assert result.exit_code == exit_code, result.output
    line = _one_line(result.stderr)
    assert line.startswith(f"warning: cannot write the {what} to") and str(target) in line, line
    assert json.loads(result.stdout)["verdict"] == ("pass" if exit_code == 0 else "fail")


@pytest.mark.parametrize("status", [500, 429])
def test_the_actions_comment_step_cannot_fail_the_job_of_a_passing_gate(
    tmp_path: Path, fake_github: FakeGitHub, status: int
) -> None:
    steps = yaml.safe_load((ROOT / "action.yml").read_text())["runs"]["steps"]
    (step,) = [s for s in steps if "assay github comment" in s.get("run", "")]
    (tmp_path / "assay-gate-comment.md").write_text(_marked(tmp_path).read_text())
    fake_github.scripted["GET"] = [
        Answer(status, {"message": "unavailable"}, {"Retry-After": "0"})
    ] * (MAX_RETRIES + 1)

    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],  # as Actions
        env={
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}",
            "RUNNER_TEMP": str(tmp_path),
            "PR": str(PULL_REQUEST),
        },
        capture_output=True,
        text=True,
        timeout=PROCESS_TIMEOUT_SECONDS,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert f"GitHub answered {status}" in _one_line(done.stderr)
    assert "::warning::" in done.stdout
    assert fake_github.writes() == []
    (failing,) = [s for s in steps if "exit 1" in s.get("run", "")]
    assert failing["if"] == "steps.gate.outputs.exit-code != '0'"  # the gate's code alone


def test_docs_ci_states_the_bounds_the_code_keeps() -> None:
    ci = " ".join((ROOT / "docs" / "ci.md").read_text().split())
    assert f"at most {MAX_PAGES} pages" in ci
    assert f"retried, at most {MAX_RETRIES} times" in ci
    assert f"more than {MAX_RETRY_AFTER_SECONDS:.0f} s is refused" in ci
    waits = ", ".join(f"{wait:.0f}" for wait in RETRY_WAITS_SECONDS[:-1])
    assert f"else {waits} and {RETRY_WAITS_SECONDS[-1]:.0f} s" in ci
