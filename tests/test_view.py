"""`assay view` and `assay report --outputs` in headless Chromium: the demo's v2 run beside its
outputs (every case, each output verified by its keyed hash before it is shown), an edited
output marked as not the scored one, the baseline's outputs side by side, a conversation's turns
and tool calls — and a canary planted in an output reaching the page but nothing the store,
Prefect's home or the logs gained.
"""

from __future__ import annotations

import html
import json
import logging
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.reports.page import CONTENT_SECURITY_POLICY
from tests.browser import render, require_chromium
from tests.conftest import PREFECT_HOME
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CANARY = "CANARYVIEWQZXW"
PLANTED_CASE = "return-label-cost"
"""The v2 case whose output carries the canary (and markup that must stay text)."""
INJECTED = '<b id="injected">bold</b>'
ROW = re.compile(r'<tr data-case-id="([^"]+)" data-s="([a-z]+)"[^>]*>(.*?)</tr>', re.S)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _planted_v2(folder: Path) -> Path:
    """The demo's v2 outputs, one of them carrying the canary and a piece of markup."""
    records = _lines(EXAMPLES / "outputs" / "support-bot-v2.jsonl")
    for record in records:
        if record["case_id"] == PLANTED_CASE:
            record["output"] = f"{record['output']} {CANARY} {INJECTED}"
    return _write(folder / "support-bot-v2.jsonl", records)


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _kept_nowhere(store: Path) -> None:
    """The canary is in no file of the store or of Prefect's home (its database and logs)."""
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    assert _files_containing(store, CANARY.encode()) == []
    assert _files_containing(PREFECT_HOME, CANARY.encode()) == []


class Demo:
    """The demo's runs (v1, then v2 against it) in a store of their own, v2's outputs planted."""

    def __init__(self, root: Path) -> None:
        self.store = root / "store"
        self.v1_outputs = EXAMPLES / "outputs" / "support-bot-v1.jsonl"
        self.v2_outputs = _planted_v2(root)
        runs: list[str] = []
        for version, outputs in (("v1", self.v1_outputs), ("v2", self.v2_outputs)):
            result = suite_run(
                suite=str(EXAMPLES / "support-suite.yaml"),
                outputs=str(outputs),
                subject=f"agent:support-bot@{version}",
                store=f"file://{self.store}",
                baseline=runs[0] if runs else None,
            )
            runs.append(result.run_id)
        self.v1, self.v2 = runs

    def cli(self, *args: str) -> str:
        result = CliRunner().invoke(app, [*args, "--store", f"file://{self.store}"])
        assert result.exit_code == 0, result.output
        return result.output


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    return Demo(tmp_path_factory.mktemp("view-demo"))


def _rows(dom: str) -> dict[str, tuple[str, str]]:
    return {case: (status, cells) for case, status, cells in ROW.findall(dom)}


def test_the_page_shows_every_output_beside_its_labels(
    demo: Demo, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    require_chromium()
    caplog.set_level(logging.DEBUG)
    page = tmp_path / "view.html"
    said = demo.cli("view", demo.v2, "--outputs", str(demo.v2_outputs), "-o", str(page))
    assert "48 the scored output, 0 not the scored output, 2 no output" in said
    rendered = render(page)
    assert rendered.console == []
    rows = _rows(rendered.dom)
    assert len(rows) == 50
    by_case = {record["case_id"]: record for record in _lines(demo.v2_outputs)}
    for case, (_, cells) in rows.items():
        if case in by_case:
            assert '<i class="' in cells, case  # its checks' labels
            assert 'data-said="scored"' in cells, case
            assert html.escape(str(by_case[case]["output"]), quote=False) in cells, case
        else:
            assert "no output" in cells and 'data-said="scored"' not in cells, case
    # the output is text, never markup; the canary reaches the page and nothing else
    assert 'id="injected"' not in rendered.dom.replace(html.escape(INJECTED, quote=False), "")
    assert CANARY in rows[PLANTED_CASE][1]
    assert CANARY not in said + caplog.text
    _kept_nowhere(demo.store)
    # the report's filters and search, by its one script
    filtered = render(page, "status=fail&tag=returns")
    shown = [r for r in re.findall(r"<tr data-case-id=[^>]*>", filtered.dom) if "hidden" not in r]
    assert 0 < len(shown) < 50 and all('data-s="fail"' in row for row in shown)
    assert re.search(r"\d+ of 50 cases shown", filtered.dom)


def test_an_edited_output_is_marked_not_the_scored_output(demo: Demo, tmp_path: Path) -> None:
    require_chromium()
    records = _lines(demo.v2_outputs)
    edited = next(r for r in records if r["case_id"] == "return-window-days")
    edited["output"] = "You have 30 days from delivery. EDITEDAFTERTHERUN"
    outputs = _write(tmp_path / "edited.jsonl", records)
    page = tmp_path / "edited.html"
    said = demo.cli("report", demo.v2, "--outputs", str(outputs), "-o", str(page))
    assert "wrote" in said
    rows = _rows(render(page).dom)
    _, cells = rows["return-window-days"]
    assert 'data-said="not_scored"' in cells and "not the scored output" in cells
    assert "EDITEDAFTERTHERUN" not in page.read_text()
    assert sum('data-said="scored"' in cells for _, cells in rows.values()) == 47


def _as_from_a_terminal() -> None:
    """Ctrl-C reaches the command as it does from a terminal. A test session started in the
    background by a non-interactive shell (`make test &`) ignores SIGINT, its children inherit
    that, and Python then installs no KeyboardInterrupt handler: the command would never hear
    the Ctrl-C this test sends (two clean-clone runs started that way timed out here)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_served_from_memory_on_loopback_beside_the_baseline_until_ctrl_c(demo: Demo) -> None:
    require_chromium()
    command = [
        sys.executable,
        "-m",
        "assay.cli",
        "view",
        demo.v2[:8],
        "--outputs",
        str(demo.v2_outputs),
        "--baseline-outputs",
        str(demo.v1_outputs),
        "--store",
        f"file://{demo.store}",
    ]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "400"}
    served = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=_as_from_a_terminal,
    )
    try:
        assert served.stdout is not None
        lines = [served.stdout.readline(), served.stdout.readline()]
        found = re.search(r"(http://127\.0\.0\.1:(\d+)/)([\w-]+)/", lines[1])
        assert found, lines
        url = found.group(0)
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
            assert answer.headers["Cache-Control"] == "no-store"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(found.group(1), timeout=10)
        assert refused.value.code == 404
        rendered = render(url)
        assert not [line for line in rendered.console if "Content Security Policy" in line]
        assert "cases shown" in rendered.dom  # the hashed script ran under the policy
        rows = _rows(rendered.dom)
        assert len(rows) == 50 and CANARY in rows[PLANTED_CASE][1]
        assert f"baseline {demo.v1}" in rendered.dom
        v1_text = {r["case_id"]: r["output"] for r in _lines(demo.v1_outputs)}
        assert html.escape(str(v1_text[PLANTED_CASE]), quote=False) in rows[PLANTED_CASE][1]
    finally:
        served.send_signal(signal.SIGINT)
        out, err = served.communicate(timeout=30)
    assert served.returncode == 0, err
    assert "stopped" in out
    assert CANARY not in out + err + lines[0] + lines[1]
    _kept_nowhere(demo.store)


def test_a_conversation_shows_its_turns_and_tool_calls(tmp_path: Path) -> None:
    require_chromium()
    store = tmp_path / "store"
    outputs = EXAMPLES / "outputs" / "conversation-v2.jsonl"
    run = suite_run(
        suite=str(EXAMPLES / "conversation-suite.yaml"),
        outputs=str(outputs),
        subject="agent:support@v2",
        store=f"file://{store}",
    )
    page = tmp_path / "conversation.html"
    result = CliRunner().invoke(
        app,
        [
            "view",
            run.run_id,
            "--outputs",
            str(outputs),
            "-o",
            str(page),
            "--store",
            f"file://{store}",
        ],
    )
    assert result.exit_code == 0, result.output
    dom = render(page).dom
    rows = _rows(dom)
    first = _lines(outputs)[0]
    _, cells = rows[str(first["case_id"])]
    assert '<ol class="exchanges">' in cells and "turn 1" in cells and "turn 2" in cells
    assert "get_order" in cells and html.escape('"order_id": "A-1041"', quote=False) in cells
    tool_results = [m for m in first["messages"] if m["role"] == "tool"]
    assert tool_results and html.escape(tool_results[0]["content"], quote=False) in cells


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("report", "RUN", "--outputs", "x.jsonl"), "--outputs needs a RUN_ID and -o FILE"),
        (("view", "V1", "--outputs", "V1_OUTPUTS", "--baseline-outputs", "x"), "no baseline"),
        (("view", "V2", "--outputs", "V2_OUTPUTS", "--port", "1", "-o", "x.html"), "not both"),
    ],
)
def test_bad_view_arguments_exit_2_with_one_line(
    demo: Demo, tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    names = {
        "V1": demo.v1,
        "V2": demo.v2,
        "RUN": demo.v2,
        "V1_OUTPUTS": str(demo.v1_outputs),
        "V2_OUTPUTS": str(demo.v2_outputs),
    }
    given = [names.get(arg, arg) for arg in args]
    result = CliRunner().invoke(app, [*given, "--store", f"file://{demo.store}"])
    assert result.exit_code == 2, result.output
    assert says in result.output and len(result.output.strip().splitlines()) == 1


def test_a_run_with_trials_shows_each_trials_output(tmp_path: Path) -> None:
    require_chromium()
    store = tmp_path / "store"
    outputs = EXAMPLES / "outputs" / "trials-v2.jsonl"
    run = suite_run(
        suite=str(EXAMPLES / "trials-suite.yaml"),
        outputs=str(outputs),
        subject="agent:support-bot@v2",
        store=f"file://{store}",
    )
    page = tmp_path / "trials.html"
    result = CliRunner().invoke(
        app,
        [
            "view",
            run.run_id,
            "--outputs",
            str(outputs),
            "-o",
            str(page),
            "--store",
            f"file://{store}",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "12 the scored output, 0 not the scored output" in result.output
    dom = render(page).dom
    shown = "".join(cells for _, cells in _rows(dom).values())
    for record in _lines(outputs):
        assert html.escape(record["output"], quote=False) in shown
    assert shown.count('data-said="scored"') == 12 and "trial 3" in shown
