"""A calibration report as a page (`assay report --calibration REPORT_ID`), and the judge's
calibration figures the run page shows: agreement, kappa, sensitivity and specificity with their
intervals, and the confusion matrix of human labels against the judge's verdicts."""

from __future__ import annotations

from assay.calibration.report import CalibrationReport, reports
from assay.errors import NotFoundError
from assay.rate import Rate
from assay.reports import charts, page
from assay.store import EvidenceStore


def find_report(store: EvidenceStore, report_id: str) -> CalibrationReport:
    """The recorded calibration report `report_id` (NotFoundError when there is none)."""
    for report in reports(store):
        if report.report_id == report_id:
            return report
    raise NotFoundError(f"no calibration report {report_id} in {store.uri}")


def _estimate(label: str, rate: Rate, successes: int, n: int) -> charts.Estimate | None:
    if rate.rate is None or rate.lo is None or rate.hi is None:
        return None
    return charts.Estimate(
        label,
        rate.rate,
        rate.lo,
        rate.hi,
        f"{successes}/{n} · {rate.rate:.3f} ({rate.lo:.3f}–{rate.hi:.3f})",
    )


def confusion_matrix(report: CalibrationReport) -> str:
    """Human labels (rows) against the judge's verdicts (columns), counts of judged items."""
    sens, spec = report.sensitivity, report.specificity
    cells = {
        "tp": sens.tp,
        "fn": sens.positives - sens.tp,
        "fp": spec.negatives - spec.tn,
        "tn": spec.tn,
    }

    def cell(name: str) -> str:
        return f'<td class="num" data-cell="{name}">{cells[name]}</td>'

    return (
        '<table class="confusion" aria-label="confusion matrix">'
        '<thead><tr><th>people \\ judge</th><th class="num">judge: pass</th>'
        '<th class="num">judge: fail</th></tr></thead><tbody>'
        f"<tr><th>people: pass</th>{cell('tp')}{cell('fn')}</tr>"
        f"<tr><th>people: fail</th>{cell('fp')}{cell('tn')}</tr>"
        "</tbody></table>"
    )


def figures_chart(report: CalibrationReport) -> str | None:
    """Agreement, sensitivity and specificity with their intervals (None when nothing was
    judged); the agreement target as the reference line."""
    sens, spec = report.sensitivity, report.specificity
    rows = [
        _estimate("agreement", report.agreement, sens.tp + spec.tn, report.n),
        _estimate("sensitivity", sens, sens.tp, sens.positives),
        _estimate("specificity", spec, spec.tn, spec.negatives),
    ]
    shown = [row for row in rows if row is not None]
    if not shown:
        return None
    return charts.forest(
        "Judge against people",
        shown,
        reference=report.targets.agreement,
        axis="share of judged items (95% Wilson interval)",
        reference_label="agreement target",
    )


def _kappa_text(report: CalibrationReport) -> str:
    kappa = report.kappa
    if not kappa.defined or kappa.value is None:
        return "undefined (one class)"
    if kappa.lo is None or kappa.hi is None:  # defined, but its standard error is not
        return f"{kappa.value:.3f} (no interval)"
    return f"{kappa.value:.3f} ({kappa.lo:.3f}–{kappa.hi:.3f})"


def summary(report: CalibrationReport) -> str:
    """The status line, key figures and confusion matrix (shared with the run page)."""
    status = "calibrated" if report.passed else "not calibrated"
    return (
        f'<div class="verdict {"ok" if report.passed else "bad"}">{page.text(status)}</div>'
        + page.note(report.verdict)
        + page.figures(
            [
                ("judge", f"{report.judge.model} · prompt {report.judge.prompt_version}"),
                ("judged items", f"{report.n} of {report.items} ({report.skipped} skipped)"),
                ("kappa", _kappa_text(report)),
                (
                    "targets",
                    f"agreement ≥ {report.targets.agreement:.3f}, "
                    f"kappa ≥ {report.targets.kappa:.3f}",
                ),
            ]
        )
        + confusion_matrix(report)
    )


def calibration_page(report: CalibrationReport) -> str:
    """The whole page of one calibration report."""
    chart = figures_chart(report)
    skipped = [f"{reason}: {count}" for reason, count in sorted(report.skipped_reasons.items())]
    body = [
        f"<h1>Calibration report {page.text(report.report_id)}</h1>",
        f'<p class="sub">set {page.text(report.calibration_set)} · '
        f"{report.at:%Y-%m-%d %H:%M} UTC</p>",
        summary(report),
        page.charts([chart] if chart else []),
        page.section(
            "Ratcheted targets",
            page.note(
                f"after this report: agreement ≥ {report.ratcheted_targets.agreement:.3f}, "
                f"kappa ≥ {report.ratcheted_targets.kappa:.3f}"
            ),
        ),
    ]
    if skipped:
        body.append(page.section("Skipped items", page.bullets(skipped)))
    return page.document(f"Calibration {report.report_id}", body)
