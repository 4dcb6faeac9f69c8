"""Judge-corrected paired differences (docs/EVAL-METHODOLOGY.md, "Judge-corrected paired
differences"): the estimator against ppi-python, its coverage on a simulation where the judge is
biased differently on the two versions, and the gate deciding on it through real runs.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import ppi_py  # type: ignore[import-untyped]
import pytest
from scipy.stats import norm  # type: ignore[import-untyped]

from assay.calibration.labels import CalibrationItem, append_item
from assay.ppi import PairedArm, ppi_paired_difference
from assay.runs.comparison import compare_with_baseline
from assay.runs.records import load_aggregate, load_result
from assay.runs.render import markdown_summary, suite_run_verdict
from assay.store import FileStore
from tests.judge_server import JudgeServer, RecordedRequest, Reply, verdict
from tests.launched import gate, suite_run


def _arm(rng: np.random.Generator, n: int, big_n: int, lenient: float) -> PairedArm:
    labels = rng.random(n) < 0.7
    unlabelled_truth = rng.random(big_n) < 0.7

    def judged(truth: np.ndarray) -> np.ndarray:
        return np.where(truth, rng.random(truth.size) < 0.95, rng.random(truth.size) < lenient)

    return PairedArm(
        labels=labels.astype(float),
        predictions=judged(labels).astype(float),
        unlabelled=judged(unlabelled_truth).astype(float),
    )


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_paired_difference_is_ppi_py_on_the_per_case_differences(seed: int) -> None:
    rng = np.random.default_rng(seed)
    baseline, candidate = _arm(rng, 120, 900, 0.1), _arm(rng, 120, 900, 0.35)
    d = baseline.labels - candidate.labels
    d_hat = baseline.predictions - candidate.predictions
    d_unlabelled = baseline.unlabelled - candidate.unlabelled

    ours = ppi_paired_difference(baseline, candidate)

    estimate = float(ppi_py.ppi_mean_pointestimate(d, d_hat, d_unlabelled, lam=None)[0])
    lo, hi = ppi_py.ppi_mean_ci(d, d_hat, d_unlabelled, alpha=0.05, lam=None)
    assert ours.estimate == pytest.approx(estimate, abs=1e-9)
    assert ours.lo == pytest.approx(float(lo[0]), abs=1e-9)
    assert ours.hi == pytest.approx(float(hi[0]), abs=1e-9)
    assert (ours.labelled, ours.unlabelled) == (120, 900)
    assert ours.naive == pytest.approx(float(d_unlabelled.mean()))
    assert 0.0 <= ours.lam <= 1.0


def test_arms_of_different_cases_are_refused() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="same cases"):
        ppi_paired_difference(_arm(rng, 30, 100, 0.1), _arm(rng, 30, 99, 0.1))


REPLICATES, SHARED, LABELLED = 2000, 600, 150
P_BASELINE, P_CANDIDATE = 0.75, 0.65
TRUE_DROP = P_BASELINE - P_CANDIDATE
# (false pass, false fail) rates of the judge: lenient on the candidate's new style.
JUDGE_ERRORS = {"baseline": (0.10, 0.05), "candidate": (0.35, 0.05)}


def _simulated_pairs(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Human verdicts and judge verdicts, shape (2, REPLICATES, SHARED): arm 0 the baseline.
    Each case has a difficulty both versions share (so the arms are correlated, as in real
    pairs): pass when difficulty + own noise is below the threshold giving the arm's rate."""
    difficulty = rng.standard_normal((REPLICATES, SHARED))
    humans, judges = [], []
    for rate, (false_pass, false_fail) in zip(
        (P_BASELINE, P_CANDIDATE), JUDGE_ERRORS.values(), strict=True
    ):
        cut = norm.ppf(rate) * np.sqrt(2)
        human = difficulty + rng.standard_normal(difficulty.shape) < cut
        noise = rng.random(difficulty.shape)
        judges.append(np.where(human, noise >= false_fail, noise < false_pass))
        humans.append(human)
    return np.asarray(humans, dtype=float), np.asarray(judges, dtype=float), difficulty


def test_the_corrected_interval_covers_a_drop_the_judge_hides_and_the_raw_one_does_not() -> None:
    humans, judges, _ = _simulated_pairs(np.random.default_rng(20261205))
    covered = 0
    for r in range(REPLICATES):
        baseline, candidate = (
            PairedArm(
                labels=humans[arm, r, :LABELLED],
                predictions=judges[arm, r, :LABELLED],
                unlabelled=judges[arm, r, LABELLED:],
            )
            for arm in (0, 1)
        )
        corrected = ppi_paired_difference(baseline, candidate)
        covered += corrected.lo <= TRUE_DROP <= corrected.hi
    # The raw paired interval of the judge's own verdicts over every shared case.
    d_hat = judges[0] - judges[1]
    mean = d_hat.mean(axis=1)
    half = norm.ppf(0.975) * d_hat.std(axis=1, ddof=1) / np.sqrt(SHARED)
    raw_covered = int(np.sum(np.abs(mean - TRUE_DROP) <= half))
    coverage, raw_coverage = covered / REPLICATES, raw_covered / REPLICATES
    print(
        f"coverage of the true drop {TRUE_DROP:.2f} over {REPLICATES} simulated pairs: "
        f"judge-corrected (PPI++ paired) {coverage:.3f}, raw judge {raw_coverage:.3f}; "
        f"mean raw judge drop {mean.mean():+.3f}"
    )
    assert coverage >= 0.93
    assert raw_coverage <= 0.5


# Through real runs: 200 cases, one llm_judge check each. The judge passes what carries GOOD.
# v1: cases 0–149 GOOD, and people agree. v2: cases 20–169 GOOD, but people fail 110–149 (the
# judge is lenient on v2's style): the judge sees no drop, people see 150 → 110 passes.
GOOD, BAD = "MARK-GOOD", "MARK-BAD"
CASES, LABELLED_PAIRS, ONE_SIDED = 200, 60, 5


def _marker_judge(recorded: RecordedRequest) -> Reply:
    return verdict("pass", 0.9) if GOOD in recorded.text("user") else verdict("fail", 0.2)


def _judged(version: int, case: int) -> bool:
    return case < 150 if version == 1 else 20 <= case < 170


def _human(version: int, case: int) -> bool:
    return _judged(version, case) and not (version == 2 and 110 <= case < 150)


def _text(version: int, case: int) -> str:
    return f"{GOOD if _judged(version, case) else BAD} answer {case} v{version}"


def _outputs(tmp_path: Path, version: int) -> str:
    path = tmp_path / f"outputs-v{version}.jsonl"
    path.write_text(
        "".join(
            json.dumps({"case_id": f"c{i:03d}", "output": _text(version, i)}) + "\n"
            for i in range(CASES)
        )
    )
    return str(path)


def _label(path: Path, version: int, case: int, output: str | None = None) -> None:
    text = output or _text(version, case)
    append_item(
        path,
        CalibrationItem(
            item_id=f"c{case:03d}#0@{hashlib.sha256(text.encode()).hexdigest()[:12]}",
            case_id=f"c{case:03d}",
            input=f"Question {case}?",
            output=text,
            rubric="Answers the question.",
            label="pass" if _human(version, case) else "fail",
            labeler="tester",
            labeled_at=datetime(2026, 1, 1, tzinfo=UTC),
        ),
    )


@pytest.mark.usefixtures("prefect_api")
def test_the_gate_decides_on_the_corrected_difference_and_says_so(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judge_env.script(default=_marker_judge)
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "suite: paired\nnon_inferiority_margin: 0.05\n"
        "defaults:\n  - llm_judge: Answers the question.\ncases:\n"
        + "".join(f"  - id: c{i:03d}\n    input: Question {i}?\n" for i in range(CASES))
    )
    rng = np.random.default_rng(7)
    drawn = rng.choice(CASES, LABELLED_PAIRS + ONE_SIDED, replace=False)
    pairs = sorted(int(c) for c in drawn[:LABELLED_PAIRS])
    one_sided = sorted(int(c) for c in drawn[LABELLED_PAIRS:])
    labels = tmp_path / "labels.jsonl"
    for case in pairs:
        _label(labels, 1, case)
        _label(labels, 2, case)
    for case in one_sided:
        _label(labels, 1, case)
        _label(labels, 2, case, output=f"{_text(2, case)} (another agent's answer)")

    baseline = suite_run(suite=str(suite), outputs=_outputs(tmp_path, 1), subject="agent:p@v1")
    candidate = _outputs(tmp_path, 2)
    asked = {"suite": str(suite), "outputs": candidate, "baseline": baseline.run_id}
    judged_only = gate(**asked, subject="agent:p@v2")
    corrected_run = gate(**asked, subject="agent:p@v2b", calibration=str(labels))

    raw = judged_only.result.regression
    assert raw is not None and raw.status.value == "no_regression"
    assert raw.judge_corrected is None and raw.decided_by is not None
    assert raw.decided_by.regressed == "newcombe"

    comparison = corrected_run.result.regression
    assert comparison is not None and comparison.judge_corrected is not None
    corrected = comparison.judge_corrected
    d = np.array([int(_human(1, c)) - int(_human(2, c)) for c in pairs], dtype=float)
    d_hat = np.array([int(_judged(1, c)) - int(_judged(2, c)) for c in pairs], dtype=float)
    rest = sorted(set(range(CASES)) - set(pairs))
    d_unlabelled = np.array([int(_judged(1, c)) - int(_judged(2, c)) for c in rest], dtype=float)
    lo, hi = ppi_py.ppi_mean_ci(d, d_hat, d_unlabelled, alpha=0.05, lam=None)
    estimate = float(ppi_py.ppi_mean_pointestimate(d, d_hat, d_unlabelled, lam=None)[0])
    assert corrected.estimate == pytest.approx(estimate, abs=1e-9)
    assert corrected.interval == pytest.approx([float(lo[0]), float(hi[0])], abs=1e-9)
    assert (corrected.labelled, corrected.unlabelled) == (LABELLED_PAIRS, CASES - LABELLED_PAIRS)
    assert corrected.labelled_one_side == ONE_SIDED
    assert corrected.judge_diff == pytest.approx(0.0)
    assert corrected.interval[0] > 0
    assert comparison.status.value == "regressed"
    dumped = comparison.model_dump(mode="json")
    assert dumped["decided_by"] == {
        "regressed": "judge_corrected",
        "non_inferiority": "judge_corrected",
    }
    assert (
        dumped["judge_corrected"]["method"] == "ppi++ paired"
        and "lambda" in dumped["judge_corrected"]
    )

    rules = {rule.rule: rule for rule in corrected_run.decision.rules}
    assert not rules["regressed"].passed
    assert rules["regressed"].detail.endswith("(judge-corrected, PPI++ paired)")
    assert not rules["insufficient_evidence"].passed
    assert rules["insufficient_evidence"].detail.endswith("(judge-corrected, PPI++ paired)")
    raw_rules = {rule.rule: rule for rule in judged_only.decision.rules}
    assert raw_rules["regressed"].passed
    assert raw_rules["regressed"].detail.endswith("(Newcombe)")

    verdict_words = suite_run_verdict(corrected_run.result).message
    assert f"judge-corrected drop {corrected.estimate:+.3f}" in verdict_words
    summary = markdown_summary(corrected_run.result)
    assert f"judge-corrected drop (PPI++ paired, human labels) {corrected.estimate:+.3f}" in summary
    assert "intervals used (decided_by): regressed ← judge-corrected, PPI++ paired" in summary

    # Too few labelled pairs: no correction, a warning saying why, and the usual interval decides.
    few = tmp_path / "few.jsonl"
    for case in pairs[:10]:
        _label(few, 1, case)
        _label(few, 2, case)
    store = FileStore(store_dir)
    recorded = load_result(store, corrected_run.result.run_id)
    again = compare_with_baseline(
        store,
        load_aggregate(store, recorded.run_id),
        recorded.metrics,
        0.05,
        baseline.run_id,
        calibration=str(few),
    )
    assert again.judge_corrected is None and again.status.value == "no_regression"
    assert again.judge_corrected_warning == (
        f"judge_corrected: 10 shared case(s) have labels in {few} for both runs' outputs (0 for "
        "one run only) and 190 have none; at least 30 and 1 are needed (label both runs' "
        "outputs with `assay label`)"
    )
    assert again.decided_by is not None and again.decided_by.regressed == "newcombe"
    assert again.judge_corrected_warning in markdown_summary(
        corrected_run.result.model_copy(update={"regression": again})
    )
    print(
        f"judge-corrected drop {corrected.estimate:+.3f} [{lo[0]:+.3f}, {hi[0]:+.3f}] "
        f"(λ {corrected.lambda_:.2f}) vs judge {corrected.judge_diff:+.3f}; truth +0.200"
    )
