"""The judge-corrected pass rate task: reads the calibration set and its reports (I/O, retried)."""

from __future__ import annotations

from prefect import task

from assay.calibration.correction import correct_pass_rate
from assay.judge.port import JudgePin
from assay.judge.reliability import Correction
from assay.runs.metrics import RunMetrics
from tasks._options import IO_RETRIES
from tasks._store import evidence_store


@task(name="correct-judged-pass-rate", task_run_name="correct-judged-pass-rate", **IO_RETRIES)
def correct_judged_pass_rate(
    store: str, judge: JudgePin | None, metrics: RunMetrics, calibration: str
) -> Correction:
    """The PPI++ correction of the run's judged pass rate from the calibration set's report."""
    return correct_pass_rate(
        evidence_store(store),
        calibration,
        judge,
        metrics.judged_checks,
        metrics.judged_checks_passed,
    )
