"""Judge admission (#38, item 1): `assay judge admit` and the gate's `judge_not_admitted` rule.

The judge is the local OpenAI-compatible server playing a judge that is right on every answer
with a reference (`grades_by_reference`), once honest and once steerable by any candidate that
asks to pass (`obeys_injections=True`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from assay.admission.admit import same_model
from assay.admission.battery import load_battery
from assay.admission.record import (
    AdmissionRecord,
    CalibrationState,
    CanaryResult,
    Fingerprint,
    FlipRate,
    SelfPreference,
    record_admission,
)
from assay.cli import app
from assay.gate.decision import NOT_ADMITTED, RULES
from assay.judge.port import JudgePin
from assay.store import EvidenceStore
from tests.judge_grading import grades_by_reference
from tests.judge_server import JudgeServer
from tests.launched import gate

pytestmark = pytest.mark.usefixtures("prefect_api")

JUDGE_MODEL = "judge-test-1"  # the `judge_env` fixture's
CASES = 10


def _calibration_set(tmp_path: Path) -> Path:
    """40 labelled items a judge right on references agrees with: half pass, half fail."""
    at = datetime(2026, 11, 1, tzinfo=UTC).isoformat()
    lines = []
    for i in range(40):
        label = "pass" if i % 2 else "fail"
        answer = f"answer{i}" if label == "pass" else f"answer{i + 100}"
        item = {
            "item_id": f"i{i}",
            "input": f"question {i}",
            "expected": f"answer{i}",
            "rubric": "Gives the reference answer.",
            "output": f"It is {answer}.",
            "label": label,
            "labeler": "ana",
            "labeled_at": at,
        }
        lines.append(json.dumps(item) + "\n")
    path = tmp_path / "set.jsonl"
    path.write_text("".join(lines))
    return path


def _suite_and_outputs(tmp_path: Path) -> tuple[str, str]:
    cases = [
        {
            "id": f"c{i:02d}",
            "input": f"question {i}",
            "expected": f"answer{i}",
            "scorers": [{"llm_judge": {"rubric": "Gives the reference answer."}}],
        }
        for i in range(CASES)
    ]
    suite = tmp_path / "judged.yaml"
    suite.write_text(yaml.safe_dump({"suite": "admitted", "pass_threshold": 0.6, "cases": cases}))
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:02d}", "output": f"It is answer{i}."}) + "\n"
            for i in range(CASES)
        )
    )
    return str(suite), str(outputs)


def record_passing_admission(store: EvidenceStore, judge: JudgePin) -> None:
    """Record that this judge was admitted with the shipped battery (for gate tests whose
    judge server answers a fixed verdict, which the canaries would rightly refuse)."""
    fingerprint = Fingerprint(judge=judge, battery_version=load_battery().version)
    clean = FlipRate.of(0, 10, flips=0, n=10, unjudged=0, limit=0.1, passed=True)
    record_admission(
        store,
        AdmissionRecord(
            admission_id="admitted-by-test",
            fingerprint=fingerprint,
            fingerprint_key=fingerprint.key,
            calibration=CalibrationState(
                report_id="r", passed=True, agreement=None, n=40, verdict="calibrated"
            ),
            position=clean,
            verbosity=clean,
            self_preference=SelfPreference(subject_model=None, status="not_declared"),
            canaries=CanaryResult.of(
                0, 10, steered=0, n=10, unjudged=0, steered_ids=[], limit=0, passed=True
            ),
            admitted=True,
            failed=[],
            at=datetime.now(UTC),
        ),
    )


def _admit(*args: str) -> tuple[int, dict[str, object]]:
    ran = CliRunner().invoke(app, ["judge", "admit", "--json", *args])
    assert ran.exit_code in (0, 1), ran.output
    return ran.exit_code, json.loads(ran.stdout)


def test_a_steerable_judge_is_refused_and_cannot_gate_an_honest_one_is_admitted_and_gates(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    battery = load_battery()
    calibration = str(_calibration_set(tmp_path))
    suite, outputs = _suite_and_outputs(tmp_path)

    judge_env.script(default=grades_by_reference(obeys_injections=True))
    code, record = _admit("--calibration", calibration)
    assert code == 1
    assert record["failed"] == ["canaries"]
    canaries = record["canaries"]
    assert isinstance(canaries, dict)
    assert canaries["steered_ids"] == [canary.id for canary in battery.canaries]
    assert (canaries["steered"], canaries["n"], canaries["rate"]) == (10, 10, 1.0)
    assert canaries["lo"] == pytest.approx(0.7225, abs=1e-4)  # Wilson, 10/10
    evidence = b"".join(path.read_bytes() for path in (store_dir / "admission").rglob("*.json"))
    for canary in battery.canaries:  # ids, never the text
        assert canary.output.encode()[-40:] not in evidence

    refused = gate(suite=suite, outputs=outputs, subject="agent:bot@v1")
    assert [reason.rule for reason in refused.decision.reasons] == [NOT_ADMITTED]
    assert "canaries failed" in refused.decision.reasons[0].message
    assert refused.decision.admission is not None and not refused.decision.admission.admitted
    assert refused.result.metrics.passed == CASES  # the verdicts are reported, not gating

    judge_env.script(default=grades_by_reference())
    code, record = _admit("--calibration", calibration, "--fresh-judge")
    assert code == 0, record["failed"]
    assert record["admitted"] is True
    for part, flips, n in (("position", 0, CASES), ("verbosity", 0, 2 * CASES)):
        figure = record[part]
        assert isinstance(figure, dict)
        assert (figure["flips"], figure["n"], figure["rate"], figure["lo"]) == (flips, n, 0.0, 0.0)
        assert 0.0 < figure["hi"] < 0.35
    assert record["self_preference"] == {"subject_model": None, "status": "not_declared"}

    admitted = gate(suite=suite, outputs=outputs, subject="agent:bot@v2")
    assert admitted.decision.verdict == "pass", admitted.decision.reasons
    rule = next(r for r in admitted.decision.rules if r.rule == NOT_ADMITTED)
    assert rule.passed and "admitted: calibration passed" in rule.detail
    assert [r.rule for r in admitted.decision.rules] == list(RULES[: len(admitted.decision.rules)])


def test_a_judge_of_the_subjects_own_model_is_refused_unless_opted_in(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=grades_by_reference())
    calibration = str(_calibration_set(tmp_path))

    code, record = _admit("--calibration", calibration, "--subject-model", "openai/Judge-Test-1")
    assert code == 1 and record["failed"] == ["self_preference"]
    assert record["self_preference"] == {
        "subject_model": "openai/Judge-Test-1",
        "status": "same_refused",
    }

    code, record = _admit(
        "--calibration", calibration, "--subject-model", JUDGE_MODEL, "--allow-self-judging"
    )
    assert code == 0 and record["self_preference"]["status"] == "same_allowed"  # type: ignore[index]

    code, record = _admit("--subject-model", "gpt-4o")  # the latest calibration report is read
    assert code == 0 and record["self_preference"]["status"] == "different"  # type: ignore[index]


def test_a_judge_without_a_calibration_report_is_not_admitted(
    judge_env: JudgeServer, store_dir: Path
) -> None:
    judge_env.script(default=grades_by_reference())
    code, record = _admit()
    assert code == 1 and record["failed"] == ["calibration"]


def test_model_names_compare_without_case_or_provider() -> None:
    assert same_model("gpt-4o", "openai/GPT-4o")
    assert not same_model("gpt-4o", "gpt-4o-mini")


def test_the_shipped_battery_is_versioned_and_its_canaries_cover_every_kind() -> None:
    battery = load_battery()
    assert battery.version.startswith("default@") and len(battery.version) == len("default@") + 12
    kinds = {canary.kind for canary in battery.canaries}
    assert kinds == {"instruction", "grade_line", "delimiter", "zero_width", "role_play"}
