"""Calibration: judge a human-labelled set → measure agreement → record the report → artifact.

The set travels by reference (a path): Prefect records every flow parameter, so the flow never
receives item text. The report (figures only) is written once under `calibration/reports/`.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

from assay.calibration.render import calibration_verdict
from assay.calibration.report import CalibrationReport
from flows.launch import untagged_tasks
from tasks._store import store_reference
from tasks.calibration import calibrate_judge, publish_calibration_artifact
from tasks.verdicts import verdict_state


def _run_name() -> str:
    return f"calibrate · {Path(str(flow_run.parameters['calibration_set'])).name}"


@flow(name="calibration", flow_run_name=_run_name, persist_result=False, log_prints=False)
def calibration(
    calibration_set: str,
    store: str | None = None,
    storage_block: str | None = None,
    judge_block: str | None = None,
    fresh_judge: bool = False,
) -> CalibrationReport:
    """Measure the configured judge against a calibration set's human labels.

    Args:
        calibration_set: Path of the calibration set (JSONL written by `assay label`).
        store: Evidence store URI; defaults to `ASSAY_STORE` or `file://.assay`.
        storage_block: Name of a saved EvidenceStorage block; takes precedence over `store`.
        judge_block: Name of a saved JudgeSettings block (default: the environment).
        fresh_judge: Ignore cached verdicts and judge again.

    Returns:
        The report: agreement, kappa, sensitivity, specificity, verbosity bias, targets, and
        whether the judge (model pin, prompt version) is now calibrated.
    """
    with untagged_tasks():  # the flow run carries the tags
        store_uri = store_reference(store, storage_block)
        report = calibrate_judge(
            store_uri, calibration_set, str(flow_run.id), judge_block, fresh_judge
        )
        publish_calibration_artifact(report)
        return verdict_state(calibration_verdict(report), report)
