"""What a reader is shown of a judge's admission: its state and each part's figure.

The run report (`assay.reports.admission`), the run and gate artifacts (`tasks/`) and the
pull-request comment (`assay.gate.comment`) all show the same thing, from here: admitted, not
admitted or no admission record; the fingerprint (short) and battery version; and per part
(calibration agreement and kappa, position and verbosity flip rates, self-preference, injection
canaries; a jury's agreement, reported) its figure with n, its 95% interval, the limit and pass
or fail. Canaries are named
by id, never by their text (the record holds nothing else).
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel

from assay.admission.battery import load_battery
from assay.admission.record import (
    AdmissionRecord,
    AdmissionState,
    Fingerprint,
    FlipRate,
    admission_state,
)
from assay.judge.agreement import JuryAgreement
from assay.judge.port import JudgePin
from assay.store import EvidenceStore

FINGERPRINT_CHARS: Final = 12
"""Characters of the fingerprint key shown (its full key names the records' folder)."""

StateName = Literal["admitted", "not admitted", "no admission record"]


class AdmissionFigure(BaseModel):
    """One measured part of an admission as shown: the figure with n and its 95% interval.

    `value`, `n`, `lo` and `hi` are None where the part has no such figure (self-preference is a
    comparison of names; a kappa on a one-class set is undefined)."""

    part: str
    figure: str
    value: float | None
    count: str
    """`successes/n` for a rate (`3/10`), n alone for kappa, empty without a figure."""
    n: int | None
    lo: float | None
    hi: float | None
    limit: str
    passed: bool | None
    """None for a figure reported beside the admission, not part of it (a jury's agreement)."""
    detail: str


def judge_admission(store: EvidenceStore, judge: JudgePin) -> AdmissionState:
    """The admission state of a run's judge for the battery shipped with this Assay."""
    fingerprint = Fingerprint(judge=judge, battery_version=load_battery().version)
    return admission_state(store, fingerprint)


def state_name(state: AdmissionState) -> StateName:
    """Admitted, not admitted (a record that failed), or no admission record."""
    if state.admission_id is None:
        return "no admission record"
    return "admitted" if state.admitted else "not admitted"


def headline(state: AdmissionState) -> str:
    """`not admitted (canaries failed) · fingerprint 0a1b2c3d4e5f · battery default@…`."""
    name = state_name(state)
    failed = f" ({', '.join(state.failed)} failed)" if state.failed else ""
    advice = " — run `assay judge admit`" if name == "no admission record" else ""
    return (
        f"{name}{failed} · fingerprint {state.fingerprint_key[:FINGERPRINT_CHARS]} · "
        f"battery {state.battery_version}{advice}"
    )


def figures(record: AdmissionRecord) -> list[AdmissionFigure]:
    """Each part's figures, in admission order."""
    calibration = record.calibration
    agreement, kappa = calibration.agreement, calibration.kappa
    agreed = None if agreement is None or agreement.rate is None else agreement.rate * calibration.n
    rows = [
        AdmissionFigure(
            part="calibration",
            figure="agreement",
            value=None if agreement is None else agreement.rate,
            count="" if agreed is None else f"{round(agreed)}/{calibration.n}",
            n=calibration.n,
            lo=None if agreement is None else agreement.lo,
            hi=None if agreement is None else agreement.hi,
            limit="the report's targets",
            passed=calibration.passed,
            detail=calibration.verdict,
        ),
        AdmissionFigure(
            part="calibration",
            figure="kappa",
            value=None if kappa is None else kappa.value,
            count="" if kappa is None or kappa.value is None else str(calibration.n),
            n=calibration.n,
            lo=None if kappa is None else kappa.lo,
            hi=None if kappa is None else kappa.hi,
            limit="the report's targets",
            passed=calibration.passed,
            detail=_kappa_detail(record),
        ),
        _flip_figure("position", record.position),
        _flip_figure("verbosity", record.verbosity),
        AdmissionFigure(
            part="self_preference",
            figure="subject's declared model",
            value=None,
            count="",
            n=None,
            lo=None,
            hi=None,
            limit="differs from the judge, or opted in",
            passed=record.self_preference.passed,
            detail=f"{record.self_preference.subject_model or 'not declared'}: "
            + record.self_preference.status.replace("_", " "),
        ),
    ]
    canaries = record.canaries
    steered = ", ".join(canaries.steered_ids)
    rows.append(
        AdmissionFigure(
            part="canaries",
            figure="steered",
            value=canaries.rate,
            count=f"{canaries.steered}/{canaries.n}",
            n=canaries.n,
            lo=canaries.lo,
            hi=canaries.hi,
            limit=f"≤ {canaries.limit} steered",
            passed=canaries.passed,
            detail=(f"steered: {steered}" if steered else "none steered")
            + _unjudged(canaries.unjudged),
        )
    )
    if record.jury is not None:
        rows.append(_jury_figure(record.jury))
    return rows


def _jury_figure(jury: JuryAgreement) -> AdmissionFigure:
    votes = "undefined" if jury.effective_votes is None else f"{jury.effective_votes:.2f}"
    return AdmissionFigure(
        part="jury",
        figure="Krippendorff's alpha (verdicts)",
        value=jury.alpha_verdicts,
        count=str(jury.items),
        n=jury.items,
        lo=None,
        hi=None,
        limit="reported",
        passed=None,
        detail=f"{jury.jurors} jurors, {jury.aggregation}; effective votes {votes}",
    )


def result_word(figure: AdmissionFigure) -> str:
    """`pass`, `fail`, or `reported` for a figure outside the admission's decision."""
    if figure.passed is None:
        return "reported"
    return "pass" if figure.passed else "fail"


def _kappa_detail(record: AdmissionRecord) -> str:
    kappa = record.calibration.kappa
    if kappa is None:
        return "not in this record (re-admit to keep it)"
    if not kappa.defined:
        return "undefined: the labels are one class"
    return ""


def _flip_figure(part: str, flips: FlipRate) -> AdmissionFigure:
    return AdmissionFigure(
        part=part,
        figure="flip rate",
        value=flips.rate,
        count=f"{flips.flips}/{flips.n}",
        n=flips.n,
        lo=flips.lo,
        hi=flips.hi,
        limit=f"≤ {flips.limit:g}",
        passed=flips.passed,
        detail=_unjudged(flips.unjudged).removeprefix("; "),
    )


def _unjudged(count: int) -> str:
    return f"; {count} unjudged" if count else ""


def value_text(figure: AdmissionFigure) -> str:
    """`0.300` or `n/a`."""
    return "n/a" if figure.value is None else f"{figure.value:.3f}"


def interval_text(figure: AdmissionFigure) -> str:
    """`0.108–0.603`, or `n/a` when the figure has no interval."""
    if figure.lo is None or figure.hi is None:
        return "n/a"
    return f"{figure.lo:.3f}–{figure.hi:.3f}"


def markdown_lines(state: AdmissionState) -> list[str]:
    """The admission as markdown (PR comment, artifacts): the headline, then one table row per
    figure; without a record, the headline alone."""
    lines = [f"**Judge admission: {_cell(headline(state))}**", ""]
    if state.record is None:
        return lines
    lines += [
        "| part | figure | value | n | 95% CI | limit | result | detail |",
        "|---|---|---:|---:|---|---|---|---|",
    ]
    for row in figures(state.record):
        result = "**fail**" if row.passed is False else result_word(row)
        lines.append(
            f"| {row.part} | {row.figure} | {value_text(row)} | {row.count or 'n/a'} "
            f"| {interval_text(row)} | {_cell(row.limit)} | {result} | {_cell(row.detail)} |"
        )
    return [*lines, ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
