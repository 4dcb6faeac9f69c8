"""Calibration tasks: judge a labelled set and record the report; publish it as an artifact."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact

from assay.calibration.labels import load_set
from assay.calibration.render import markdown_report
from assay.calibration.report import (
    CalibrationReport,
    JudgePin,
    current_targets,
    measure,
    record_report,
)
from assay.canonical import content_hash
from assay.errors import InputError
from assay.hashing import OutputHasher, store_secret
from assay.judge.port import JudgeRequest
from assay.judge.service import judge_requests
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.artifacts import artifact_key
from tasks.judge import judge_setup


@task(name="calibrate-judge", **IO_RETRIES)
def calibrate_judge(
    store: str,
    calibration_set: str,
    report_id: str,
    judge_block: str | None = None,
    fresh_judge: bool = False,
) -> CalibrationReport:
    """Judge every labelled item, measure the judge against the labels, record the report.

    Verdicts go through the verdict cache, the FinOps preflight and the cost ledger like every
    other judge call (budget scope `suite:calibration`). The item text stays in this task's
    memory; the report holds figures only.
    """
    target = evidence_store(store)
    setup = judge_setup(judge_block, fresh_judge)
    if setup.make_judge is None or setup.model is None or setup.prompt_version is None:
        raise InputError(
            "judge", f"{setup.skip_reason}: configure a judge to calibrate (see README, Judge)"
        )
    items = load_set(calibration_set)
    hasher = OutputHasher(store_secret(target))
    pin = JudgePin(model=setup.model, prompt_version=setup.prompt_version)
    requests = [
        (
            "judge-cache/calibration/"
            + content_hash(
                {
                    "input": item.input,
                    "expected": item.expected,
                    "rubric": item.rubric,
                    "output": hasher(item.output),
                    "judge": pin.model_dump(),
                }
            ).removeprefix("sha256:")
            + ".json",
            JudgeRequest(
                case_id=item.item_id,
                input=item.input,
                expected=item.expected,
                rubric=item.rubric,
                output=item.output,
            ),
        )
        for item in items
    ]
    judged = judge_requests(
        target,
        setup,
        requests,
        run_id=report_id,
        chunk=0,
        suite="calibration",
        subject=f"judge:{setup.model}",
    )
    report = measure(
        items,
        judged.verdicts,
        report_id=report_id,
        targets=current_targets(target),
        judge=pin,
        calibration_set=calibration_set,
    )
    record_report(target, report)
    return report


def publish_calibration_artifact(report: CalibrationReport) -> None:
    """The calibration figures as a markdown artifact (no item text)."""
    create_markdown_artifact(
        markdown=markdown_report(report),
        key=artifact_key("assay-calibration", report.judge.model),
        description=(
            f"Judge calibration of {report.judge.model} ({report.judge.prompt_version}) against "
            "human labels: agreement, kappa, sensitivity, specificity, verbosity bias."
        ),
    )
