"""A suite's trend and scorecard (issue 39): one run per subject still draws every subject, each
at its own place on a run-order axis with whole-number ticks (it was 0.945–1.050 with four of
six subjects hidden behind the others); a set of outputs scored twice counts once, and the
page says which run re-scored which."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.runs.scorecard import scorecard
from assay.store import FileStore
from tests.browser import render, require_chromium
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

SUBJECTS = [f"agent:bot-{letter}" for letter in "abcdef"]


def _suite(tmp_path: Path) -> str:
    suite = {
        "suite": "trend-six",
        "cases": [{"id": f"c{i}", "input": "q", "scorers": ["json_valid"]} for i in range(10)],
    }
    path = tmp_path / "trend-six.json"
    path.write_text(json.dumps(suite))
    return str(path)


def _outputs(tmp_path: Path, failing: int) -> str:
    path = tmp_path / f"out-{failing}.jsonl"
    path.write_text(
        "".join(
            json.dumps({"case_id": f"c{i}", "output": "oops" if i < failing else "{}"}) + "\n"
            for i in range(10)
        )
    )
    return str(path)


def test_one_run_per_subject_draws_every_subject_on_a_run_order_axis(
    store_dir: Path, tmp_path: Path
) -> None:
    require_chromium()
    suite = _suite(tmp_path)
    for number, subject in enumerate(SUBJECTS):
        suite_run(suite=suite, outputs=_outputs(tmp_path, number), subject=subject)
    page = tmp_path / "trend.html"
    done = CliRunner().invoke(app, ["report", "--trend", "trend-six", "-o", str(page)])
    assert done.exit_code == 0, done.output
    rendered = render(page)
    assert rendered.console == []
    places = []
    for number in range(len(SUBJECTS)):
        group = re.search(rf'<g id="trend-points-{number}">(.*?)</g>\s*</g>', rendered.dom, re.S)
        assert group is not None, number
        places += re.findall(r'<use [^>]*\bx="([\d.]+)"', group.group(1))
    assert len(places) == len(set(places)) == len(SUBJECTS)  # each at its own place
    ticks = re.findall(r'<g id="xtick_\d+">.*?<text[^>]*>(.*?)</text>', rendered.dom, re.S)
    assert [tick.strip() for tick in ticks] == [str(n) for n in range(1, 7)]
    legend = re.search(r'<g id="legend_1">(.*?)</svg>', rendered.dom, re.S)
    assert legend is not None and all(subject in legend.group(1) for subject in SUBJECTS)


def test_outputs_scored_twice_count_once_and_the_re_scoring_says_so(
    store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = _suite(tmp_path), _outputs(tmp_path, 3)
    first = suite_run(suite=suite, outputs=outputs, subject="agent:bot-a")
    again = suite_run(suite=suite, outputs=outputs, subject="agent:bot-a")
    other = suite_run(suite=suite, outputs=_outputs(tmp_path, 1), subject="agent:bot-a")
    (row,) = scorecard(FileStore(store_dir), suite="trend-six")
    assert (row.runs, row.rescored) == (2, 1)
    assert (row.pooled_passed, row.pooled_scored) == (7 + 9, 20)
    assert row.latest_run == other.run_id
    page = tmp_path / "trend.html"
    done = CliRunner().invoke(app, ["report", "--trend", "trend-six", "-o", str(page)])
    assert done.exit_code == 0, done.output
    text = page.read_text()
    assert f"re-scoring of the outputs of {first.run_id}" in text
    listed = re.findall(r"<td>(\d+)</td><td>agent:bot-a</td><td>([\w-]+)</td>", text)
    assert listed == [("1", again.run_id), ("2", other.run_id)]
