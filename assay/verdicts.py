"""Each flow's verdict in a few words: what its final Prefect state is named, and why.

A verdict is a result, not a crash: the flows finish Completed, with the state *named* for the
verdict (so a regressed run, a failed gate and a passing run look different in the runs list)
and the reason, with its numbers, as the state message. Built from evidence only, never from
output text.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from assay.calibration.report import CalibrationReport
from assay.gate.decision import GateDecision
from assay.rate import rate_text
from assay.regression import RegressionStatus
from assay.release import ReleaseReport, stop_lines
from assay.runs.records import EvalResult


class FlowVerdict(BaseModel):
    name: str
    """The final state's name, e.g. `Regressed`."""
    message: str
    """Why, with the figures."""


def suite_run_verdict(result: EvalResult) -> FlowVerdict:
    """Suite run: `Regressed` (against its baseline) beats `Passed` / `Not passed`."""
    m = result.metrics
    rate = f"pass rate {rate_text(m.passed, m.scored)}"
    regression = result.regression
    if regression is not None and regression.status is RegressionStatus.REGRESSED:
        assert regression.baseline is not None
        b = regression.baseline
        return FlowVerdict(
            name="Regressed",
            message=f"{rate}, down from {b.passed}/{b.scored} in baseline "
            f"{regression.baseline_run}",
        )
    threshold = f"threshold {result.pass_threshold:.2f}"
    if result.passed:
        return FlowVerdict(name="Passed", message=f"{rate}, {threshold}")
    coverage = m.coverage
    if result.verdict_reason and (coverage is None or coverage < result.min_coverage):
        return FlowVerdict(name="Not passed", message=result.verdict_reason)
    return FlowVerdict(name="Not passed", message=f"{rate}, below {threshold}")


def gate_verdict(decision: GateDecision) -> FlowVerdict:
    """Gate: `Gate passed`, or `Gate failed` naming the first failing rule."""
    if decision.verdict == "pass":
        warned = f"; {len(decision.warnings)} warning(s)" if decision.warnings else ""
        return FlowVerdict(name="Gate passed", message=f"every rule passed{warned}")
    first = decision.reasons[0]
    more = len(decision.reasons) - 1
    return FlowVerdict(
        name="Gate failed",
        message=f"{first.rule}: {first.message}" + (f" (+{more} more)" if more else ""),
    )


def calibration_verdict(report: CalibrationReport) -> FlowVerdict:
    return FlowVerdict(
        name="Calibrated" if report.passed else "Not calibrated", message=report.verdict
    )


def release_verdict(report: ReleaseReport) -> FlowVerdict:
    """Release: `Release ok`, or `Release blocked` with the first variant's stopping gate."""
    if report.passed:
        return FlowVerdict(name="Release ok", message="every variant passed every gate")
    return FlowVerdict(name="Release blocked", message=stop_lines(report)[0])


def nightly_verdict(jobs: Sequence[tuple[str, bool | None]]) -> FlowVerdict:
    """Nightly: `All passed`, or `Some failed` naming the jobs that did not pass.

    Args:
        jobs: Each job's `SUITE · SUBJECT` and whether it passed (None: the job failed).
    """
    bad = [name for name, passed in jobs if passed is not True]
    if not bad:
        return FlowVerdict(name="All passed", message=f"{len(jobs)} of {len(jobs)} jobs passed")
    return FlowVerdict(
        name="Some failed",
        message=f"{len(bad)} of {len(jobs)} jobs did not pass: {', '.join(bad)}",
    )
