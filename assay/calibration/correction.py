"""The PPI++ judge-corrected pass rate of a run, from a calibration set's per-item verdicts.

The run's judged `llm_judge` verdicts are the unlabelled sample; the latest calibration report of
the set for the run's very judge (model pin and prompt version, redaction settings included)
gives the labelled (human label, judge verdict) pairs; `assay.ppi.ppi_mean` combines them. No
report for this judge, or too few judged items: no correction, and a warning saying why.
Assumption: the calibration items are a random sample of the same kind of cases.
"""

from __future__ import annotations

from assay.calibration.labels import load_set
from assay.calibration.report import MIN_JUDGED, CalibrationReport, reports, set_hash
from assay.judge.port import JudgePin
from assay.judge.reliability import Correction, JudgeCorrected
from assay.store import EvidenceStore


def _none(warning: str) -> Correction:
    return Correction(warning=f"judge_corrected: {warning}")


def _latest_for(found: list[CalibrationReport], pin: JudgePin) -> CalibrationReport | None:
    mine = [report for report in found if report.judge == pin]
    return max(mine, key=lambda report: report.at) if mine else None


def correct_pass_rate(
    store: EvidenceStore,
    calibration_set: str,
    judge: JudgePin | None,
    judged: int,
    passed: int,
) -> Correction:
    """The PPI++ correction of a run's judged pass rate from a calibration set's latest report.

    Args:
        store: Where the calibration reports are.
        calibration_set: Path of the calibration set (matched to reports by its content hash).
        judge: The run's judge, None when the run had no judge.
        judged: The run's `llm_judge` checks with a pass/fail verdict (N).
        passed: How many of them passed.

    Raises:
        InputError: The set cannot be read.
    """
    from assay.ppi import ppi_mean  # numpy and scipy: paid only by runs that ask

    if judge is None:
        return _none("the run had no judge, so there is nothing to correct")
    if judged == 0:
        return _none("the run has no judged llm_judge verdicts to correct")
    digest = set_hash(load_set(calibration_set))
    found = [report for report in reports(store) if report.set_hash == digest]
    report = _latest_for(found, judge)
    if report is None:
        others = sorted({f"{r.judge.model} · {r.judge.prompt_version}" for r in found})
        if others:
            return _none(
                f"{calibration_set} was calibrated for {', '.join(others)}, not for this run's "
                f"judge {judge.model} · {judge.prompt_version}; run `assay calibrate` with it"
            )
        return _none(
            f"{calibration_set} has no calibration report; run `assay calibrate "
            f"{calibration_set}` with this run's judge first"
        )
    if report.item_verdicts is None:
        return _none(
            f"report {report.report_id} predates per-item verdicts; run `assay calibrate` again"
        )
    pairs = [item for item in report.item_verdicts if item.verdict is not None]
    if len(pairs) < MIN_JUDGED:
        return _none(
            f"{calibration_set} has only {len(pairs)} judged item(s) for this judge; "
            f"at least {MIN_JUDGED} are needed"
        )
    result = ppi_mean(
        [float(item.label) for item in pairs],
        [float(item.verdict or 0) for item in pairs],
        [1.0] * passed + [0.0] * (judged - passed),
    )
    return Correction(
        corrected=JudgeCorrected(
            estimate=result.estimate,
            interval=(result.lo, result.hi),
            labelled=result.labelled,
            unlabelled=result.unlabelled,
            lambda_=result.lam,
            naive=result.naive,
            calibration_report=report.report_id,
        )
    )
