"""Calibration tasks: judge a labelled set and record the report; publish it as an artifact."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact

from assay.calibration.calibrate import calibrate
from assay.calibration.render import markdown_report
from assay.calibration.report import CalibrationReport
from blocks.judge_settings import judge_setup
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.artifacts import artifact_key


@task(name="calibrate-judge", task_run_name="calibrate-judge", **IO_RETRIES)
def calibrate_judge(
    store: str,
    calibration_set: str,
    report_id: str,
    judge_block: str | None = None,
    fresh_judge: bool = False,
) -> CalibrationReport:
    """Judge every labelled item, measure the judge against the labels, record the report.

    See `assay.calibration.calibrate`: the item text stays in this task's memory; the report
    holds figures only.
    """
    return calibrate(
        evidence_store(store), judge_setup(judge_block, fresh_judge), calibration_set, report_id
    )


def publish_calibration_artifact(report: CalibrationReport) -> None:
    """The calibration figures as a markdown artifact (no item text)."""
    create_markdown_artifact(
        markdown=markdown_report(report),
        key=artifact_key("assay-calibration", report.judge.model or "judge"),
        description=(
            f"Judge calibration of {report.judge.model} ({report.judge.prompt_version}) against "
            "human labels: agreement, kappa, sensitivity, specificity, verbosity bias."
        ),
    )
