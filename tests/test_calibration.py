"""Judge calibration: figures against published values, one-class sets, the ratchet, the pin,
the calibration flow through the real SDK, and `assay label` driven in a real pty."""

from __future__ import annotations

import json
import math
import os
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pexpect
import pytest
from typer.testing import CliRunner

from assay.calibration.labels import CalibrationItem, load_set
from assay.calibration.options import CalibrationOptions
from assay.calibration.report import (
    CalibrationReport,
    Targets,
    current_targets,
    is_calibrated,
    measure,
    record_report,
)
from assay.cli import app
from assay.errors import InputError
from assay.judge.port import JudgePin, Verdict
from assay.store import FileStore
from tests import launched
from tests.conftest import EXAMPLES, PREFECT_HOME
from tests.judge_server import JudgeServer, RecordedRequest, Reply, verdict
from tests.test_minimal_data import _files_containing, _flush_prefect_logs, _prefect_database_dir

PIN = JudgePin(model="judge-test-1", prompt_version="default@abc")
T0 = datetime(2026, 11, 1, tzinfo=UTC)
CANARY = "CANARY-calibration-5d1f"
PROMPT = r"label (\x1b\[[0-9;]*m)*\[p/f/s/q\]"  # Rich may still style the choices


def _items(tp: int, fn: int, fp: int, tn: int) -> tuple[list[CalibrationItem], list[Verdict]]:
    """Items and verdicts making a 2×2 table (rows human pass/fail, columns judge pass/fail)."""
    cells = [("pass", "pass", tp), ("pass", "fail", fn), ("fail", "pass", fp), ("fail", "fail", tn)]
    items: list[CalibrationItem] = []
    verdicts: list[Verdict] = []
    for human, machine, count in cells:
        for _ in range(count):
            items.append(
                CalibrationItem(
                    item_id=f"i{len(items)}",
                    input="q",
                    output="o" * (len(items) % 7 + 1),
                    rubric="r",
                    label=human,  # type: ignore[arg-type]
                    labeler="ana",
                    labeled_at=T0,
                )
            )
            verdicts.append(
                Verdict(status=machine, score=1.0 if machine == "pass" else 0.0, reason="judged")
            )  # type: ignore[arg-type]
    return items, verdicts


def _wilson_by_hand(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    # Wilson EB, JASA 1927;22:209–212, closed form.
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def _measure(
    items: list[CalibrationItem],
    verdicts: list[Verdict],
    targets: Targets | None = None,
    run: int = 1,
) -> CalibrationReport:
    return measure(
        items,
        verdicts,
        report_id=f"r{run}",
        targets=targets or Targets(),
        judge=PIN,
        calibration_set="set.jsonl",
        now=T0 + timedelta(minutes=run),
    )


def test_kappa_and_agreement_match_published_values() -> None:
    # Bonett DG, statpsych ci.kappa(.05, f00=31, f01=12, f10=4, f11=58): kappa 0.6756757,
    # 95% CI 0.5317210–0.8196303 (rows one rater, columns the other).
    items, verdicts = _items(tp=58, fn=4, fp=12, tn=31)
    report = _measure(items, verdicts)
    assert report.n == 105
    assert report.kappa.defined
    assert report.kappa.value == pytest.approx(0.6756757, abs=1e-6)
    assert report.kappa.lo == pytest.approx(0.5317210, abs=1e-6)
    assert report.kappa.hi == pytest.approx(0.8196303, abs=1e-6)
    lo, hi = _wilson_by_hand(89, 105)
    assert report.agreement.rate == pytest.approx(89 / 105)
    assert (report.agreement.lo, report.agreement.hi) == (pytest.approx(lo), pytest.approx(hi))
    # agreement 0.848 < 0.85: not calibrated, though kappa clears 0.6
    assert not report.passed
    assert report.verdict.startswith("not calibrated: agreement 0.848")


def test_sensitivity_and_specificity_match_published_values() -> None:
    # Altman DG, Bland JM, "Diagnostic tests 1: sensitivity and specificity", BMJ 1994;308:1552:
    # liver scan vs pathology, TP 231, FN 27, FP 32, TN 54 → sensitivity 0.895, specificity 0.628.
    items, verdicts = _items(tp=231, fn=27, fp=32, tn=54)
    report = _measure(items, verdicts)
    s, p = report.sensitivity, report.specificity
    assert (s.tp, s.positives, p.tn, p.negatives) == (231, 258, 54, 86)
    assert round(s.rate or 0, 3) == 0.895
    assert round(p.rate or 0, 3) == 0.628
    assert (s.lo, s.hi) == tuple(pytest.approx(v) for v in _wilson_by_hand(231, 258))
    # Newcombe 1998, Stat Med 17:857, Table I, method 3 (Wilson): 81/263 → 0.2553–0.3662.
    items, verdicts = _items(tp=81, fn=182, fp=0, tn=5)
    lo81 = _measure(items, verdicts).sensitivity
    assert (round(lo81.lo or 0, 4), round(lo81.hi or 0, 4)) == (0.2553, 0.3662)


def test_verbosity_bias_is_the_length_verdict_correlation() -> None:
    # Lengths 1..5, judge passes the three longest: r = 3 / sqrt(10 · 1.2) = 0.866025 (by hand).
    items = [
        CalibrationItem(
            item_id=f"v{i}",
            input="q",
            output="x" * i,
            rubric="r",
            label="pass",
            labeler="ana",
            labeled_at=T0,
        )
        for i in range(1, 6)
    ] + [
        CalibrationItem(
            item_id="f",
            input="q",
            output="x",
            rubric="r",
            label="fail",
            labeler="ana",
            labeled_at=T0,
        )
    ]
    verdicts = (
        [Verdict(status="fail", score=0.0, reason="judged")] * 2
        + [Verdict(status="pass", score=1.0, reason="judged")] * 3
        + [Verdict.skipped("no credentials")]
    )
    report = _measure(items, verdicts)
    assert report.verbosity_bias.n == 5
    assert report.verbosity_bias.r == pytest.approx(3 / math.sqrt(12), abs=1e-9)
    assert report.skipped == 1 and report.skipped_reasons == {"no credentials": 1}
    assert report.n == 5  # the skipped item is in no denominator


def test_a_one_class_set_calibrates_nothing() -> None:
    items, verdicts = _items(tp=40, fn=0, fp=0, tn=0)
    report = _measure(items, verdicts)
    assert report.agreement.rate == 1.0
    assert not report.kappa.defined and report.kappa.value is None
    assert not report.passed
    assert "all one class" in report.verdict and "calibrates nothing" in report.verdict
    assert report.specificity.negatives == 0 and report.specificity.rate is None


def test_a_set_with_nothing_judged_says_so_not_one_class() -> None:
    items, _ = _items(tp=1, fn=0, fp=0, tn=1)  # one pass and one fail label
    report = _measure(items, [Verdict.skipped("no credentials")] * 2)
    assert not report.passed and report.n == 0
    assert "nothing was judged (all 2 item(s) were skipped" in report.verdict
    assert "one class" not in report.verdict


def test_one_label_of_each_class_is_not_enough() -> None:
    report = _measure(*_items(tp=1, fn=0, fp=0, tn=1))
    assert not report.passed and report.n == 2
    assert "only 2 item(s) judged; at least 30 are needed (one label of each class" in (
        report.verdict
    )


def test_targets_ratchet_up_over_three_runs_and_never_down(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    assert current_targets(store) == Targets(agreement=0.85, kappa=0.6)

    first = _measure(*_items(tp=50, fn=1, fp=1, tn=48), targets=current_targets(store))
    assert first.passed
    record_report(store, first)
    raised = current_targets(store)
    assert raised.agreement == pytest.approx(first.agreement.lo)
    assert raised.kappa == pytest.approx(first.kappa.lo)
    assert raised.agreement > 0.85 and raised.kappa > 0.6

    second = _measure(*_items(tp=46, fn=4, fp=4, tn=46), current_targets(store), run=2)
    assert second.agreement.rate == pytest.approx(0.92)  # would have passed the first targets
    assert not second.passed
    record_report(store, second)
    assert current_targets(store) == raised  # a failing run lowers nothing
    assert not is_calibrated(store, PIN)  # the latest report for this pin failed

    third = _measure(*_items(tp=50, fn=0, fp=0, tn=50), current_targets(store), run=3)
    assert third.passed
    record_report(store, third)
    final = current_targets(store)
    assert final.agreement == pytest.approx(_wilson_by_hand(100, 100)[0])
    assert final.kappa == raised.kappa  # perfect kappa has no interval: nothing to raise to
    assert is_calibrated(store, PIN)
    other_prompt = PIN.model_copy(update={"prompt_version": "default@def"})
    other_model = PIN.model_copy(update={"model": "judge-test-2"})
    assert not is_calibrated(store, other_prompt)
    assert not is_calibrated(store, other_model)


def test_a_report_that_started_from_older_targets_lowers_nothing(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    start = current_targets(store)
    slow = _measure(*_items(tp=48, fn=2, fp=2, tn=48), start, run=1)  # reads 0.85 / 0.6
    fast = _measure(*_items(tp=50, fn=0, fp=1, tn=49), start, run=2)
    record_report(store, fast)  # finishes first, with the higher raise
    record_report(store, slow)  # finishes last, with a lower raise
    final = current_targets(store)
    assert final.agreement == pytest.approx(fast.ratcheted_targets.agreement)
    highest_kappa = max(fast.ratcheted_targets.kappa, slow.ratcheted_targets.kappa)
    assert final.kappa == pytest.approx(highest_kappa)
    assert slow.ratcheted_targets.agreement < final.agreement


def test_too_few_or_too_many_unjudged_items_calibrate_nothing() -> None:
    # Two agreeing items: agreement 1.0, kappa 1.0 — and a 95% CI of 0.34–1 for the agreement.
    tiny = _measure(*_items(tp=1, fn=0, fp=0, tn=1))
    assert tiny.kappa.value == pytest.approx(1.0) and not tiny.passed
    assert "only 2 item(s) judged; at least 30 are needed" in tiny.verdict
    items, verdicts = _items(tp=25, fn=0, fp=0, tn=25)
    unjudged = [Verdict.skipped("judge unavailable: APIConnectionError")] * 10
    patchy = _measure(items, verdicts[:40] + unjudged)
    assert patchy.n == 40 and patchy.skipped == 10 and not patchy.passed
    assert "10 of 50 items unjudged (more than 10%)" in patchy.verdict


def test_calibration_sets_name_file_and_line(tmp_path: Path) -> None:
    good = _items(1, 0, 0, 1)[0]
    path = tmp_path / "set.jsonl"
    path.write_text(good[0].model_dump_json() + "\n" + '{"item_id": "x", "label": "maybe"}\n')
    with pytest.raises(InputError, match=r"set.jsonl.*line 2"):
        load_set(path)
    path.write_text(good[0].model_dump_json() + "\n" + good[0].model_dump_json() + "\n")
    with pytest.raises(InputError, match=r"line 2.*duplicate item id .* \(first at line 1\)"):
        load_set(path)


# ---------------------------------------------------------------- through the real SDK


def _write_set(path: Path, rows: list[tuple[str, str, str]]) -> None:
    """rows: (item id, output, human label)."""
    path.write_text(
        "".join(
            CalibrationItem(
                item_id=item_id,
                input="How long do returns take?",
                output=output,
                rubric="States the 30-day window.",
                label=label,  # type: ignore[arg-type]
                labeler="ana",
                labeled_at=T0,
            ).model_dump_json()
            + "\n"
            for item_id, output, label in rows
        )
    )


def _judges_by_marker(recorded: RecordedRequest) -> Reply:
    """Passes exactly the outputs that mention 30 days: a judge that agrees with people."""
    text = recorded.text("user")
    return verdict("pass", 0.9) if "30 days" in text else verdict("fail", 0.1)


@pytest.mark.usefixtures("prefect_api")
def test_calibration_flow_and_cli_judge_through_the_sdk(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    set_path = tmp_path / "set.jsonl"
    rows = [(f"g{i}", f"Within 30 days. {CANARY}", "pass") for i in range(20)] + [
        (f"b{i}", f"Whenever you like. {CANARY}", "fail") for i in range(20)
    ]
    _write_set(set_path, rows)
    judge_env.script(default=_judges_by_marker)

    report = launched.flow("calibration", CalibrationOptions(calibration_set=str(set_path)))
    assert len(judge_env.requests) == 40
    assert (report.n, report.sensitivity.tp, report.specificity.tn) == (40, 20, 20)
    assert report.kappa.value == pytest.approx(1.0) and report.passed
    assert report.judge.model == "judge-test-1"
    assert is_calibrated(FileStore(store_dir), report.judge)

    result = CliRunner().invoke(app, ["calibrate", str(set_path), "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert set(payload) >= {
        "n",
        "agreement",
        "kappa",
        "sensitivity",
        "specificity",
        "verbosity_bias",
        "targets",
        "passed",
        "judge",
    }
    assert set(payload["kappa"]) == {"value", "lo", "hi", "defined"}
    assert set(payload["sensitivity"]) == {"rate", "tp", "positives", "lo", "hi"}
    assert set(payload["judge"]) == {"model", "prompt_version"}
    assert len(judge_env.requests) == 40  # the second calibration came from the verdict cache

    judge_env.script(default=verdict("pass", 0.9))  # a judge that passes everything
    result = CliRunner().invoke(app, ["calibrate", str(set_path), "--fresh-judge", "--json"])
    assert result.exit_code == 1
    assert json.loads(result.stdout)["kappa"]["value"] == pytest.approx(0.0)
    assert not is_calibrated(FileStore(store_dir), report.judge)

    _flush_prefect_logs()
    needle = CANARY.encode()
    assert _files_containing(tmp_path, needle) == [set_path]  # only the opted-in set holds it
    assert _files_containing(PREFECT_HOME, needle) == []
    assert _files_containing(_prefect_database_dir(), needle) == []


def test_calibrate_without_a_judge_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_JUDGE_MODEL", raising=False)
    set_path = tmp_path / "set.jsonl"
    _write_set(set_path, [("a", "x", "pass")])
    result = CliRunner().invoke(app, ["calibrate", str(set_path)])
    assert result.exit_code == 2
    assert "no judge configured" in result.stderr


# ---------------------------------------------------------------- assay label in a real pty


def _spawn_label(set_path: Path, store: Path) -> pexpect.spawn:
    env = {**os.environ, "COLUMNS": "100", "TERM": "xterm", "NO_COLOR": "1"}
    return pexpect.spawn(
        sys.executable,
        [
            "-m",
            "assay.cli",
            "label",
            str(EXAMPLES / "support-suite.yaml"),
            "--outputs",
            str(EXAMPLES / "outputs" / "support-bot-v1.jsonl"),
            "--into",
            str(set_path),
            "--labeler",
            "ana",
            "--store",
            f"file://{store}",
        ],
        env=env,
        encoding="utf-8",
        timeout=60,
        dimensions=(50, 100),
    )


def test_label_session_in_a_pty_appends_and_resumes(tmp_path: Path) -> None:
    set_path, store = tmp_path / "set.jsonl", tmp_path / "s"
    session = _spawn_label(set_path, store)
    session.expect(r"8 item\(s\) to label, 0 already")
    for answer in ("p", "f", "s"):
        session.expect(PROMPT)
        session.sendline(answer)
    session.expect(PROMPT)
    session.sendline("x")  # not a choice: asked again, nothing written
    session.expect(r"Please select one of the available options")
    session.sendline("q")
    session.expect(r"Labelled 2 item\(s\); the set holds 2")
    session.expect(pexpect.EOF)
    session.close()
    assert session.exitstatus == 0

    items = load_set(set_path)
    assert [item.label for item in items] == ["pass", "fail"]
    assert all(item.labeler == "ana" and item.rubric for item in items)
    assert items[0].item_id.startswith("window-40-days#")
    first_bytes = set_path.read_bytes()

    session = _spawn_label(set_path, store)
    session.expect(r"6 item\(s\) to label, 2 already")  # the skipped item is offered again
    session.expect(PROMPT)
    session.sendline("p")
    session.expect(PROMPT)
    session.sendline("q")
    session.expect(r"the set holds 3")
    session.expect(pexpect.EOF)
    assert set_path.read_bytes().startswith(first_bytes)  # appended, never rewritten
    assert len(load_set(set_path)) == 3
    assert (
        timedelta(0) <= datetime.now(UTC) - load_set(set_path)[-1].labeled_at < timedelta(minutes=5)
    )


def test_label_shows_outputs_exactly_as_written_never_as_markup(tmp_path: Path) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "suite: markup\ncases:\n  - id: c1\n    input: '[bold]question[/bold]'\n"
        "    scorers:\n      - llm_judge: {rubric: 'Answers [the] question.'}\n"
    )
    outputs = tmp_path / "out.jsonl"
    outputs.write_text(json.dumps({"case_id": "c1", "output": "[/INST] hi [red]x[/red]"}) + "\n")
    session = pexpect.spawn(
        sys.executable,
        [
            "-m",
            "assay.cli",
            "label",
            str(suite),
            "--outputs",
            str(outputs),
            "--into",
            str(tmp_path / "set.jsonl"),
            "--store",
            f"file://{tmp_path / 's'}",
        ],
        env={**os.environ, "COLUMNS": "100", "TERM": "xterm", "NO_COLOR": "1"},
        encoding="utf-8",
        timeout=60,
    )
    session.expect(PROMPT)
    shown = session.before
    assert "[/INST] hi [red]x[/red]" in shown  # a markup parser would crash on [/INST]
    assert "[bold]question[/bold]" in shown and "Answers [the] question." in shown
    session.sendline("p")
    session.expect(pexpect.EOF)
    assert load_set(tmp_path / "set.jsonl")[0].output == "[/INST] hi [red]x[/red]"
