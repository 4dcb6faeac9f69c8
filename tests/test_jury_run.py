"""A jury's agreement reported for every run it judges (#38 item 2): each scoring chunk tallies
its jurors' verdicts (sums only), the chunks' tallies merge into the run's `judge_jury`, and
that equals Krippendorff's alpha of the `krippendorff` package and Kish's effective votes from
scipy's Pearson correlations over the whole run's juror verdict matrix — shown in the run's
JSON, its CLI / artifact summary and its HTML report.

The three jurors are the judge server's three scripted models of tests/test_jury.py: an honest
grader by reference, each wrong on purpose on the cases marked `flip-<juror>`; juror-c also
breaks the reply contract on the cases marked `mute-juror-c` (a missing value).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

import krippendorff
import numpy as np
import pytest
import yaml
from scipy.stats import pearsonr  # type: ignore[import-untyped]

from assay.judge.agreement import JuryTally
from assay.judge.port import JUDGE_SPLIT, JUDGED, Verdict
from assay.judge.reliability import judge_lines
from assay.reports.run import run_report
from assay.runs.records import load_aggregate
from assay.runs.render import markdown_summary
from assay.store import FileStore
from assay.telemetry.events import summary_event
from tests.judge_server import JudgeServer, RecordedRequest, Reply, malformed
from tests.launched import suite_run
from tests.test_jury import JURORS, _by_model, _scripted, jury_env  # noqa: F401 (a fixture)

CASES = 23
CHUNK_SIZE = 5
FLIPPED = {"juror-a": {3}, "juror-b": {1, 4, 7, 10, 13, 19, 22}, "juror-c": {4, 5, 8, 16, 17}}
MUTE = {2, 11, 20}
"""Cases juror-c answers off-contract: its verdict is skipped, a missing value."""


def _mute_or(name: str) -> Callable[[RecordedRequest], Reply]:
    scripted = _scripted(name)

    def policy(recorded: RecordedRequest) -> Reply:
        if f"mute-{name}" in recorded.text("user"):
            return malformed()
        return scripted(recorded)

    return policy


def _matrix() -> tuple[np.ndarray, np.ndarray]:
    """The jurors' pass (1) / fail (0) verdicts and scores, one row per juror (NaN: missing)."""
    passes = np.full((len(JURORS), CASES), np.nan)
    scores = np.full((len(JURORS), CASES), np.nan)
    for j, name in enumerate(JURORS):
        for case in range(CASES):
            if name == "juror-c" and case in MUTE:
                continue
            passed = (case % 3 != 0) ^ (case in FLIPPED[name])
            passes[j, case] = float(passed)
            scores[j, case] = {"juror-a": (1.0, 0.2)}.get(name, (0.7, 0.3))[0 if passed else 1]
    return passes, scores


def _reference_votes(passes: np.ndarray) -> float:
    """3 / (1 + 2ρ̄), ρ̄ scipy's Pearson r over each pair's shared cases."""
    found = []
    for i, j in ((0, 1), (0, 2), (1, 2)):
        shared = ~np.isnan(passes[i]) & ~np.isnan(passes[j])
        found.append(pearsonr(passes[i][shared], passes[j][shared]).statistic)
    return 3 / (1 + 2 * max(float(np.mean(found)), 0.0))


@pytest.mark.usefixtures("prefect_api")
def test_a_multi_chunk_run_reports_its_jurys_agreement_over_every_judged_check(
    jury_env: Callable[..., Path],  # noqa: F811 (the fixture imported above)
    judge_server: JudgeServer,
    store_dir: Path,
    tmp_path: Path,
) -> None:
    judge_server.script(default=_by_model({name: _mute_or(name) for name in JURORS}))
    suite, outputs = tmp_path / "suite.yaml", tmp_path / "outputs.jsonl"
    check = {"llm_judge": {"rubric": "Gives the reference answer."}}
    cases = [
        {"id": f"c{i:02d}", "input": f"question {i}", "expected": f"answer{i}", "scorers": [check]}
        for i in range(CASES)
    ]
    suite.write_text(yaml.safe_dump({"suite": "jury-run", "pass_threshold": 0.5, "cases": cases}))
    lines = []
    for i in range(CASES):
        answer = f"answer{i + 100}" if i % 3 == 0 else f"answer{i}"
        marks = [f"flip-{name}" for name in JURORS if i in FLIPPED[name]]
        marks += ["mute-juror-c"] if i in MUTE else []
        lines.append(
            json.dumps({"case_id": f"c{i:02d}", "output": f"It is {answer}. {' '.join(marks)}"})
        )
    outputs.write_text("\n".join(lines) + "\n")

    result = suite_run(
        suite=str(suite),
        outputs=str(outputs),
        subject="agent:jury@v1",
        chunk_size=CHUNK_SIZE,
    )
    store = FileStore(store_dir)
    assert load_aggregate(store, result.run_id).chunks == 5  # the tallies of five chunks merged

    passes, scores = _matrix()
    jury = result.judge_jury
    assert jury is not None and (jury.aggregation, jury.jurors, jury.items) == (
        "majority",
        3,
        CASES,
    )
    nominal = krippendorff.alpha(reliability_data=passes, level_of_measurement="nominal")
    interval = krippendorff.alpha(reliability_data=scores, level_of_measurement="interval")
    assert jury.alpha_verdicts == pytest.approx(nominal, abs=1e-6)
    assert jury.alpha_scores == pytest.approx(interval, abs=1e-6)
    assert jury.effective_votes == pytest.approx(_reference_votes(passes), abs=1e-6)
    assert 0 < nominal < 1 and 1 < _reference_votes(passes) < 3  # jurors neither alike nor apart

    line = (
        f"jury: majority of 3 — alpha {nominal:.2f} (n={CASES} checks), "
        f"effective votes {_reference_votes(passes):.1f}"
    )
    assert line in judge_lines(result)  # the CLI summary's judge lines
    assert f"- {line}" in markdown_summary(result)  # the run artifact's summary
    assert line in run_report(store, result.run_id)
    sent = summary_event(result, None, 0, 0).attributes  # the OpenTelemetry summary
    assert (sent["assay.judge.jury.jurors"], sent["assay.judge.jury.items"]) == (3, CASES)
    assert sent["assay.judge.jury.alpha"] == jury.alpha_verdicts
    assert sent["assay.judge.jury.effective_votes"] == jury.effective_votes
    recorded = json.loads(result.model_dump_json())["judge_jury"]
    assert recorded["alpha_verdicts"] == pytest.approx(nominal, abs=1e-6)
    assert recorded["effective_votes"] == pytest.approx(_reference_votes(passes), abs=1e-6)


def test_chunk_tallies_merge_into_the_whole_matrixs_figures() -> None:
    """Any cut of the verdict matrix into chunks merges to the tally of the whole, to 1e-12."""
    rng = np.random.default_rng(38)
    statuses = rng.choice(["pass", "fail", "skipped"], p=[0.5, 0.4, 0.1], size=(3, 60))
    by_juror = [
        [
            Verdict.skipped(JUDGE_SPLIT)
            if status == "skipped"
            else Verdict(status=status, score=rng.random(), reason=JUDGED)
            for status in row
        ]
        for row in statuses
    ]
    whole = JuryTally.of(by_juror, "mean").agreement()
    cuts = [0, 7, 8, 30, 59, 60]
    merged = JuryTally.of([row[:7] for row in by_juror], "mean")
    for start, end in pairwise(cuts[1:]):
        merged.merge(
            JuryTally.model_validate_json(
                JuryTally.of([row[start:end] for row in by_juror], "mean").model_dump_json()
            )
        )
    ours = merged.agreement()
    assert ours.items == whole.items
    for name in ("alpha_verdicts", "alpha_scores", "mean_correlation", "effective_votes"):
        assert getattr(ours, name) == pytest.approx(getattr(whole, name), abs=1e-12), name
    with pytest.raises(ValueError, match="majority jury of 3"):
        JuryTally.of(by_juror, "majority").merge(merged)
