"""The judge-reliability task: a run's PPI++-corrected pass rate and its judge figures."""

from __future__ import annotations

from prefect import task

from assay.calibration.report import JudgePin
from assay.judge.reliability import JudgeReliability, correct_pass_rate
from assay.runs.records import JudgeInfo
from assay.runs.scoring import RunMetrics
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="judge-reliability", **IO_RETRIES)
def judge_reliability(
    store: str,
    judge: JudgeInfo | None,
    metrics: RunMetrics,
    calibration: str | None,
    redactions: dict[str, int] | None,
) -> JudgeReliability:
    """Correct the run's judged pass rate with a calibration set (when one is given)."""
    reliability = JudgeReliability(judge_redactions=redactions)
    if calibration is None:
        return reliability
    correction = correct_pass_rate(
        evidence_store(store),
        calibration,
        None if judge is None else JudgePin(**judge.model_dump()),
        metrics.judged_checks,
        metrics.judged_checks_passed,
    )
    reliability.judge_corrected = correction.corrected
    if correction.warning is not None:
        reliability.judge_warnings.append(correction.warning)
    return reliability
