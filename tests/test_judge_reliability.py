"""Judge reliability through real runs: the PPI++-corrected pass rate, repeats, redaction.

Every run is a real suite-run flow on the session's Prefect API, judged by the local
OpenAI-compatible judge server through the real `openai` SDK. The server's policy decides each
verdict from a marker in the prompt, so the tests control every verdict.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import ppi_py
import pytest

from assay.calibration.labels import CalibrationItem, append_item
from assay.calibration.options import CalibrationOptions
from assay.runs.render import markdown_summary
from tests import launched
from tests.judge_server import JudgeServer, RecordedRequest, Reply, verdict
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")

GOOD, BAD = "MARK-GOOD", "MARK-BAD"
RUN_CASES, RUN_GOOD = 200, 150
# Calibration set: (human label, judge verdict) counts — the judge passes what holds GOOD.
CALIBRATION = {("pass", "pass"): 26, ("pass", "fail"): 4, ("fail", "fail"): 8, ("fail", "pass"): 2}


def marker_judge(recorded: RecordedRequest) -> Reply:
    """Pass exactly the outputs that carry the GOOD marker."""
    return verdict("pass", 0.9) if GOOD in recorded.text("user") else verdict("fail", 0.2)


@pytest.fixture
def judge_env(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-ppi-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.delenv("ASSAY_JUDGE_REDACT", raising=False)
    judge_server.script(default=marker_judge)
    return judge_server


def judged_suite(tmp_path: Path, cases: int) -> str:
    """A suite of `cases` cases, each graded by one llm_judge check only."""
    lines = ["suite: reliability", "defaults:", "  - llm_judge: Answers the question.", "cases:"]
    lines += [f"  - id: c{i:03d}\n    input: Question {i}?" for i in range(cases)]
    path = tmp_path / "suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def outputs_file(tmp_path: Path, cases: int, good: int, extra: str = "") -> str:
    path = tmp_path / "outputs.jsonl"
    path.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:03d}", "output": f"{GOOD if i < good else BAD} {extra}"})
            + "\n"
            for i in range(cases)
        )
    )
    return str(path)


def calibration_set(tmp_path: Path, counts: dict[tuple[str, str], int], name: str) -> str:
    """A labelled set whose judge verdicts follow the marker: (label, verdict) as counted."""
    path = tmp_path / name
    number = 0
    for (label, judged), count in counts.items():
        for _ in range(count):
            append_item(
                path,
                CalibrationItem(
                    item_id=f"item-{number}",
                    input=f"Question {number}?",
                    output=f"{GOOD if judged == 'pass' else BAD} answer {number}",
                    rubric="Answers the question.",
                    label=label,  # type: ignore[arg-type]
                    labeler="tester",
                    labeled_at=datetime(2026, 1, 1, tzinfo=UTC),
                ),
            )
            number += 1
    return str(path)


def reference_ppi(counts: dict[tuple[str, str], int]) -> tuple[float, float, float]:
    """ppi_py's estimate and 95% interval for the fixture (the values the run must equal)."""
    y = np.array([float(label == "pass") for (label, _), n in counts.items() for _ in range(n)])
    y_hat = np.array([float(v == "pass") for (_, v), n in counts.items() for _ in range(n)])
    unlabelled = np.array([1.0] * RUN_GOOD + [0.0] * (RUN_CASES - RUN_GOOD))
    estimate = float(ppi_py.ppi_mean_pointestimate(y, y_hat, unlabelled, lam=None)[0])
    lo, hi = ppi_py.ppi_mean_ci(y, y_hat, unlabelled, alpha=0.05, lam=None)
    return estimate, float(lo[0]), float(hi[0])


def test_ppi_corrected_pass_rate_through_a_real_run_equals_ppi_py(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    labelled = calibration_set(tmp_path, CALIBRATION, "labels.jsonl")
    report = launched.flow("calibration", CalibrationOptions(calibration_set=labelled))
    assert report.item_verdicts is not None and len(report.item_verdicts) == 40

    suite = judged_suite(tmp_path, RUN_CASES)
    outputs = outputs_file(tmp_path, RUN_CASES, RUN_GOOD)
    result = suite_run(suite=suite, outputs=outputs, subject="agent:ppi@v1", calibration=labelled)

    corrected = result.judge_corrected
    assert corrected is not None, result.judge_warnings
    estimate, lo, hi = reference_ppi(CALIBRATION)
    assert corrected.estimate == pytest.approx(estimate, abs=1e-9)
    assert corrected.interval[0] == pytest.approx(lo, abs=1e-9)
    assert corrected.interval[1] == pytest.approx(hi, abs=1e-9)
    assert (corrected.labelled, corrected.unlabelled) == (40, RUN_CASES)
    assert corrected.naive == pytest.approx(RUN_GOOD / RUN_CASES)
    assert 0.0 <= corrected.lambda_ <= 1.0
    assert corrected.calibration_report == report.report_id
    assert result.judge_warnings == []
    dumped = result.model_dump(mode="json")["judge_corrected"]
    assert set(dumped) >= {"method", "estimate", "interval", "labelled", "unlabelled", "lambda"}
    assert dumped["method"] == "ppi++" and "naive" in dumped
    summary = markdown_summary(result)  # the run's summary artifact
    assert "judge-corrected pass rate (PPI++) 0.777 (95% CI 0.668–0.887" in summary
    assert "vs naive judge pass rate 0.750" in summary
    print(f"PPI++ fixture: assay {corrected} | ppi_py estimate {estimate!r} CI ({lo!r}, {hi!r})")


def test_a_set_for_another_pin_or_too_small_gives_null_and_a_warning(
    judge_env: JudgeServer,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = calibration_set(tmp_path, {("pass", "pass"): 6, ("fail", "fail"): 4}, "small.jsonl")
    launched.flow("calibration", CalibrationOptions(calibration_set=small))
    suite = judged_suite(tmp_path, 20)
    outputs = outputs_file(tmp_path, 20, 15)

    too_small = suite_run(suite=suite, outputs=outputs, subject="agent:ppi@v1", calibration=small)
    assert too_small.judge_corrected is None
    assert too_small.judge_warnings == [
        f"judge_corrected: {small} has only 10 judged item(s) for this judge; "
        "at least 30 are needed"
    ]

    labelled = calibration_set(tmp_path, CALIBRATION, "labels.jsonl")
    launched.flow("calibration", CalibrationOptions(calibration_set=labelled))
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-ppi-2")  # another pin
    other = suite_run(suite=suite, outputs=outputs, subject="agent:ppi@v2", calibration=labelled)
    assert other.judge_corrected is None
    (warning,) = other.judge_warnings
    assert "was calibrated for judge-ppi-1 · default@" in warning
    assert "not for this run's judge judge-ppi-2" in warning

    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-ppi-1")
    monkeypatch.setenv("ASSAY_JUDGE_REDACT", "email")  # a redaction change is a prompt change
    redacted = suite_run(suite=suite, outputs=outputs, subject="agent:ppi@v3", calibration=labelled)
    assert redacted.judge_corrected is None
    assert redacted.judge is not None and other.judge is not None
    assert redacted.judge.prompt_version != too_small.judge.prompt_version  # type: ignore[union-attr]
    assert "not for this run's judge judge-ppi-1" in redacted.judge_warnings[0]


def test_redaction_every_kind_planted_reaches_no_prompt_and_verdicts_still_arrive(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    from tests.test_redaction import PLANTED, planted_text

    planted = planted_text()
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "suite: redaction\ncases:\n"
        + "".join(
            f"  - id: r{i}\n    input: {json.dumps('Customer wrote: ' + planted)}\n"
            f"    expected: {json.dumps('Reference: ' + planted)}\n"
            "    scorers:\n      - llm_judge: Answers the question.\n"
            for i in range(3)
        )
    )
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": f"r{i}", "output": f"{GOOD} {planted}"}) + "\n" for i in range(3)
        )
    )

    result = suite_run(suite=str(suite), outputs=str(outputs), subject="agent:redact@v1")

    assert len(judge_env.requests) == 3
    for recorded in judge_env.requests:
        prompt = recorded.text("user")
        assert "[REDACTED:email]" in prompt and "[REDACTED:secret]" in prompt
        for value in PLANTED:
            assert value not in prompt
    assert result.metrics.judged_checks == 3 and result.metrics.judged_checks_passed == 3
    # per check: input + expected + output, each holding every kind
    per_text = {"email": 1, "phone": 2, "credit_card": 1, "secret": 4}
    assert result.judge_redactions == {kind: 9 * n for kind, n in sorted(per_text.items())}
    assert result.judge is not None and "+redact@" in result.judge.prompt_version
    for path in store_dir.rglob("*"):  # the suite itself (input, expected) is stored by design
        if path.is_file() and "suites" not in path.relative_to(store_dir).parts:
            for value in PLANTED:
                assert value.encode() not in path.read_bytes(), path


def test_embeddings_are_redacted_like_judge_prompts(judge_server: JudgeServer) -> None:
    from assay.judge.embeddings import OpenAIEmbedder
    from assay.judge.redaction import RedactionSettings, Redactor
    from tests.judge_server import bag_of_words
    from tests.test_redaction import planted_text

    settings = RedactionSettings()
    embedder = OpenAIEmbedder(
        "embed-1", base_url=judge_server.base_url, api_key="sk-test", redaction=settings
    )
    embedded = embedder.embed([planted_text(), "plain words"])
    assert embedded.vectors == [
        bag_of_words(Redactor(settings).redact(planted_text()).text),
        bag_of_words("plain words"),
    ]
    assert embedded.vectors[0] != bag_of_words(planted_text())
    assert embedded.redactions == {"credit_card": 1, "email": 1, "phone": 2, "secret": 4}


FLIP = "MARK-FLIP"


def flipping_judge() -> Callable[[RecordedRequest], Reply]:
    """Passes GOOD, fails BAD; a FLIP output gets pass on its 1st, 3rd, … call and fail on its
    2nd, 4th, … — the same prompt answered differently on its second call."""
    seen: dict[str, int] = {}

    def policy(recorded: RecordedRequest) -> Reply:
        prompt = recorded.text("user")
        if FLIP in prompt:
            seen[prompt] = seen.get(prompt, 0) + 1
            return verdict("pass", 0.8) if seen[prompt] % 2 else verdict("fail", 0.3)
        return marker_judge(recorded)

    return policy


def flip_outputs(tmp_path: Path, flips: int, good: int) -> str:
    path = tmp_path / "flip-outputs.jsonl"
    rows = [f"{FLIP} answer {i}" for i in range(flips)] + [GOOD] * good
    path.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:03d}", "output": text}) + "\n"
            for i, text in enumerate(rows)
        )
    )
    return str(path)


def test_repeats_take_the_majority_count_flips_and_cost_nothing_on_a_re_run(
    judge_env: JudgeServer,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from statsmodels.stats.proportion import proportion_confint

    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    judge_env.script(default=flipping_judge())
    suite = judged_suite(tmp_path, 10)
    outputs = flip_outputs(tmp_path, flips=4, good=6)

    # Its own store: a verdict cache is write-once, so a K = 1 verdict kept under repeat 0's key
    # would stand in for the K = 3 run's own first repeat on the re-run below.
    single = suite_run(
        suite=suite,
        outputs=outputs,
        subject="agent:rep@k1",
        fresh_judge=True,
        store=f"file://{tmp_path / 'single-verdict-store'}",
    )
    assert single.judge_consistency is None  # K = 1 measures nothing
    judge_env.script(default=flipping_judge())
    three = suite_run(
        suite=suite, outputs=outputs, subject="agent:rep@k3", judge_repeats=3, fresh_judge=True
    )

    assert three.metrics.judge_calls == 30 and len(judge_env.requests) == 10 + 30
    # every FLIP check: pass, fail, pass -> majority pass, but it flipped
    assert (three.metrics.passed, three.metrics.skipped_checks) == (10, 0)
    consistency = three.judge_consistency
    assert consistency is not None
    assert (consistency.repeats, consistency.checks, consistency.unanimous, consistency.split) == (
        3,
        10,
        6,
        0,
    )
    lo, hi = proportion_confint(4, 10, alpha=0.05, method="wilson")
    assert consistency.flip_rate.rate == pytest.approx(0.4)
    assert (consistency.flip_rate.lo, consistency.flip_rate.hi) == pytest.approx((lo, hi))
    # the preflight priced all K verdicts before spending
    assert single.budget is not None and three.budget is not None
    assert three.budget.projected_usd == pytest.approx(3 * single.budget.projected_usd)

    again = suite_run(suite=suite, outputs=outputs, subject="agent:rep@k3", judge_repeats=3)
    assert (again.metrics.judge_calls, again.metrics.judge_cache_hits) == (0, 30)
    assert len(judge_env.requests) == 40  # the re-run spent nothing
    assert again.judge_consistency == consistency


def test_an_even_split_is_skipped_and_the_gate_applies_the_flip_rate_limit(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    judge_env.script(default=flipping_judge())
    suite = judged_suite(tmp_path, 10)
    outputs = flip_outputs(tmp_path, flips=4, good=6)

    flags = "--subject agent:split@k2 --judge-repeats 2 --max-judge-flip-rate 0.1 --json"
    result = CliRunner().invoke(app, ["gate", suite, "--outputs", outputs, *flags.split()])
    assert result.exit_code == 1, result.output
    gate = json.loads(result.stdout)
    run = gate["result"]
    # pass then fail: an even split, skipped ("judge split"), never a pass
    assert run["metrics"]["skipped_checks"] == 4 and run["metrics"]["passed"] == 6
    assert run["metrics"]["scored"] == 6
    assert run["judge_consistency"]["split"] == 4
    assert run["judge_consistency"]["flip_rate"]["rate"] == pytest.approx(0.4)
    rules = {rule["rule"]: rule for rule in gate["rules"]}
    assert rules["judge_flip_rate"]["passed"] is False
    assert "flip rate 0.400 (4/10" in rules["judge_flip_rate"]["detail"]
    assert rules["judge_unavailable"]["passed"] is True  # a split is not an outage
    assert "judge_flip_rate" in [reason["rule"] for reason in gate["reasons"]]

    usage = CliRunner().invoke(app, ["gate", suite, "--outputs", outputs, "--judge-repeats", "0"])
    assert usage.exit_code == 2 and "--judge-repeats must be between 1 and 15" in usage.output


def test_an_old_report_without_item_verdicts_still_reads_and_corrects_nothing(
    tmp_path: Path,
) -> None:
    from assay.calibration.correction import correct_pass_rate
    from assay.calibration.labels import load_set
    from assay.calibration.report import CalibrationReport, Targets, measure, record_report
    from assay.judge.port import JudgePin, Verdict
    from assay.store import FileStore

    store = FileStore(tmp_path / "evidence")
    labelled = calibration_set(tmp_path, CALIBRATION, "labels.jsonl")
    items = load_set(labelled)
    pin = JudgePin(model="judge-old", prompt_version="default@000000000000")
    verdicts = [
        Verdict(status="pass" if GOOD in item.output else "fail", score=1.0, reason="judged")
        for item in items
    ]
    report = measure(
        items, verdicts, report_id="old", targets=Targets(), judge=pin, calibration_set=labelled
    )
    legacy = report.model_dump(mode="json", exclude={"item_verdicts"})
    assert CalibrationReport.model_validate(legacy).item_verdicts is None  # still reads
    record_report(store, CalibrationReport.model_validate(legacy))

    correction = correct_pass_rate(store, labelled, pin, judged=200, passed=150)
    assert correction.corrected is None
    assert correction.warning == (
        "judge_corrected: report old predates per-item verdicts; run `assay calibrate` again"
    )
    none = correct_pass_rate(store, labelled, None, judged=0, passed=0)
    assert none.warning == "judge_corrected: the run had no judge, so there is nothing to correct"


def test_a_judge_settings_block_sets_redaction_and_repeats(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic import SecretStr, ValidationError

    from blocks import JudgeSettings
    from tests.test_redaction import EMAIL, PHONE_US

    with pytest.raises(ValidationError, match="unknown redaction kind ssn"):
        JudgeSettings(model="m", redact=["ssn"])
    JudgeSettings(
        model="judge-block-1",
        base_url=judge_env.base_url,
        api_key=SecretStr("sk-block"),
        redact=["email"],
        redact_patterns=[r"ORD-\d{6}"],
        judge_repeats=3,
    ).save("test-reliability-judge", overwrite=True)
    monkeypatch.setenv("ASSAY_JUDGE_REDACT", "none")  # the block's kinds win over the env
    suite = judged_suite(tmp_path, 2)
    outputs = outputs_file(tmp_path, 2, 2, extra=f"{EMAIL} ORD-123456 {PHONE_US}")

    result = suite_run(
        suite=suite, outputs=outputs, subject="agent:block@v1", judge_block="test-reliability-judge"
    )

    assert len(judge_env.requests) == 2 * 3
    for recorded in judge_env.requests:
        prompt = recorded.text("user")
        assert EMAIL not in prompt and "ORD-123456" not in prompt
        assert PHONE_US in prompt  # not a configured kind
    assert result.judge_redactions == {"custom": 2, "email": 2}
    assert result.judge_consistency is not None and result.judge_consistency.repeats == 3
    assert result.judge is not None and "+redact@" in (result.judge.prompt_version or "")
