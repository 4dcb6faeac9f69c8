"""Calibration: judge a human-labelled set → measure agreement → record the report → artifact.

The set travels by reference (a path): Prefect records every flow parameter, so the flow never
receives item text. The report (figures only) is written once under `calibration/reports/`.
"""

from __future__ import annotations

from pathlib import Path

from prefect.runtime import flow_run

from assay.calibration.options import CalibrationOptions
from assay.calibration.render import calibration_verdict
from assay.calibration.report import CalibrationReport
from flows._conventions import assay_flow
from tasks._store import store_reference
from tasks.calibration import calibrate_judge, publish_calibration_artifact


def _run_name(options: CalibrationOptions) -> str:
    return f"calibrate · {Path(options.calibration_set).name}"


@assay_flow(run_name=_run_name, verdict=calibration_verdict)
def calibration(options: CalibrationOptions) -> CalibrationReport:
    """Measure the configured judge against a calibration set's human labels.

    Returns:
        The report: agreement, kappa, sensitivity, specificity, verbosity bias, targets, and
        whether the judge (model pin, prompt version) is now calibrated.
    """
    store_uri = store_reference(options.store, options.storage_block)
    report = calibrate_judge(
        store_uri,
        options.calibration_set,
        str(flow_run.id),
        options.judge_block,
        options.fresh_judge,
    )
    publish_calibration_artifact(report)
    return report
