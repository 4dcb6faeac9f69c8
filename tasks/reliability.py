"""The judge-reliability task: a run's PPI++-corrected pass rate and its judge figures."""

from __future__ import annotations

from prefect import task

from assay.judge.port import JudgePin
from assay.judge.reliability import JudgeReliability, consistency, correct_pass_rate
from assay.runs.scoring import RunMetrics
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="judge-reliability", **IO_RETRIES)
def judge_reliability(
    store: str,
    judge: JudgePin | None,
    metrics: RunMetrics,
    calibration: str | None,
    redactions: dict[str, int] | None,
    judge_repeats: int = 1,
) -> JudgeReliability:
    """The run's judge figures: redaction counts, self-consistency when its checks were judged
    more than once, and the PPI++ correction when a calibration set is given."""
    reliability = JudgeReliability(judge_redactions=redactions)
    if judge_repeats > 1:
        reliability.judge_consistency = consistency(
            judge_repeats,
            metrics.repeated_checks,
            metrics.unanimous_checks,
            metrics.split_checks,
        )
    if calibration is None:
        return reliability
    correction = correct_pass_rate(
        evidence_store(store),
        calibration,
        judge,
        metrics.judged_checks,
        metrics.judged_checks_passed,
    )
    reliability.judge_corrected = correction.corrected
    if correction.warning is not None:
        reliability.judge_warnings.append(correction.warning)
    return reliability
