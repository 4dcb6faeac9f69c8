"""The calibration report as markdown (figures and denominators only; no item text)."""

from __future__ import annotations

from assay.calibration.report import CalibrationReport
from assay.rate import Rate
from assay.verdicts import FlowVerdict


def _rate_line(name: str, successes: int, n: int, rate: Rate) -> str:
    if rate.rate is None:
        return f"| {name} | n/a | {successes}/{n} | n/a |"
    interval = "n/a" if rate.lo is None else f"{rate.lo:.3f}–{rate.hi:.3f}"
    return f"| {name} | {rate.rate:.3f} | {successes}/{n} | {interval} |"


def markdown_report(report: CalibrationReport) -> str:
    """The calibration report as markdown (figures and denominators only; no item text)."""
    kappa = report.kappa
    kappa_line = (
        "| Cohen's kappa | undefined (one-class labels) | — | — |"
        if not kappa.defined or kappa.value is None
        else f"| Cohen's kappa | {kappa.value:.3f} | {report.n} | "
        + ("n/a" if kappa.lo is None else f"{kappa.lo:.3f}–{kappa.hi:.3f}")
        + " |"
    )
    bias = report.verbosity_bias
    bias_text = "n/a" if bias.r is None else f"r = {bias.r:+.3f} (p = {bias.p:.3f}, n = {bias.n})"
    agreed = report.sensitivity.tp + report.specificity.tn
    lines = [
        f"# Judge calibration · {report.judge.model} · {report.judge.prompt_version}",
        "",
        f"**{'✅' if report.passed else '❌'} {report.verdict}**",
        "",
        "| measure | value | of | 95% CI |",
        "|---|---:|---:|---|",
        _rate_line("agreement", agreed, report.n, report.agreement),
        kappa_line,
        _rate_line(
            "sensitivity", report.sensitivity.tp, report.sensitivity.positives, report.sensitivity
        ),
        _rate_line(
            "specificity", report.specificity.tn, report.specificity.negatives, report.specificity
        ),
        "",
        f"Verbosity bias (output length vs judge pass): {bias_text}.",
        f"Items {report.items}: judged {report.n}, skipped {report.skipped}"
        + (
            " (" + ", ".join(f"{k}: {v}" for k, v in report.skipped_reasons.items()) + ")"
            if report.skipped_reasons
            else ""
        )
        + ".",
        f"Targets: agreement ≥ {report.targets.agreement:.3f}, kappa ≥ {report.targets.kappa:.3f}"
        f" → now {report.ratcheted_targets.agreement:.3f} / {report.ratcheted_targets.kappa:.3f}.",
    ]
    return "\n".join(lines)


def calibration_verdict(report: CalibrationReport) -> FlowVerdict:
    return FlowVerdict(
        name="Calibrated" if report.passed else "Not calibrated",
        passed=report.passed,
        message=report.verdict,
    )
