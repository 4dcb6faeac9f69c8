"""Judge calibration: human-labelled sets, the judge measured against them, ratcheting targets.

SPEC §9. A judge's verdicts count in the gate only after they were measured against people.

- A **calibration set** is a JSONL file, one labelled item per line, appended to by `assay label`
  and never rewritten. It is the one place where output text is stored, because an operator opts
  in by labelling it; every text field is clamped before it is written.
- A **calibration report** measures one judge (model pin, prompt version) against a set:
  agreement with its Wilson interval, Cohen's kappa with its interval (undefined on a one-class
  set, which calibrates nothing), sensitivity and specificity with their denominators, and
  verbosity bias (point-biserial correlation of output length with the judge's pass verdict).
  Reports are append-only evidence under `calibration/reports/<judge key>/`.
- **Targets** start at agreement ≥ 0.85 and kappa ≥ 0.6 and only ratchet up: a passing report
  raises each target to the lower bound of its achieved interval when that is higher. They are
  one series per evidence store (`calibration/targets/NNNNNN.json`, latest wins), so changing the
  judge or the set never resets the bar.
- A judge is **calibrated** for one (model pin, prompt version) when the latest report for that
  pair passed; a new model or a new prompt has no report and is uncalibrated.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import BaseModel, Field

from assay.calibration.labels import CalibrationItem
from assay.canonical import content_hash
from assay.judge.port import JudgePin, Verdict
from assay.rate import Rate
from assay.stats import Kappa, cohens_kappa, pearson
from assay.store import EvidenceStore

MIN_JUDGED: Final = 30
"""Judged items a report needs before it can calibrate anything (below, every interval is wide
enough to hold a useless judge: 2 agreeing items give agreement 1.0 with a 95% CI of 0.34–1)."""

MAX_SKIPPED_SHARE: Final = 0.10
"""Unjudged items a report may have: past this, the judge was measured on a biased remainder."""

DEFAULT_AGREEMENT: Final = 0.85

DEFAULT_KAPPA: Final = 0.6


class Sensitivity(Rate):
    """Judge passes among items people passed."""

    tp: int
    positives: int


class Specificity(Rate):
    """Judge fails among items people failed."""

    tn: int
    negatives: int


class KappaResult(BaseModel):
    """Cohen's kappa; `defined` is False (and the figures None) on a one-class set."""

    value: float | None
    lo: float | None
    hi: float | None
    defined: bool


class VerbosityBias(BaseModel):
    """Correlation of output length with the judge's pass verdict (point-biserial r)."""

    r: float | None
    p: float | None
    n: int


class Targets(BaseModel):
    """The bar a calibration report must meet; only ever raised."""

    agreement: float = Field(default=DEFAULT_AGREEMENT, ge=0.0, le=1.0)
    kappa: float = Field(default=DEFAULT_KAPPA, ge=-1.0, le=1.0)


class ItemVerdict(BaseModel):
    """One labelled item as figures: the human label and the judge's verdict (1 pass, 0 fail;
    None when the judge skipped it). No text, no id: the PPI++ correction needs only these."""

    label: Literal[0, 1]
    verdict: Literal[0, 1] | None


class CalibrationReport(BaseModel):
    """One calibration run's measurements (append-only evidence; no item text).

    Attributes:
        n: Items the judge judged (the denominator of every figure below).
        items: Items in the set.
        skipped: Items the judge did not judge (reasons counted in `skipped_reasons`).
        targets: The targets this report was held to.
        ratcheted_targets: The targets after this report (higher only when it passed).
        passed: Agreement and a defined kappa met their targets.
        verdict: One sentence saying why the judge is or is not calibrated.
        item_verdicts: Per item, in set order, the human label and the judge's verdict (None
            in reports written before they were kept).
    """

    report_id: str
    calibration_set: str
    set_hash: str
    n: int
    items: int
    skipped: int
    skipped_reasons: dict[str, int]
    agreement: Rate
    kappa: KappaResult
    sensitivity: Sensitivity
    specificity: Specificity
    verbosity_bias: VerbosityBias
    targets: Targets
    ratcheted_targets: Targets
    passed: bool
    verdict: str
    judge: JudgePin
    at: datetime
    item_verdicts: list[ItemVerdict] | None = None


def set_hash(items: Sequence[CalibrationItem]) -> str:
    """Content hash of the labelled set (ids, labels and text), to tell sets apart in reports."""
    return content_hash([item.model_dump(mode="json") for item in items])


def _shortfalls(
    n: int, items: int, agreement: float | None, kappa: Kappa, targets: Targets
) -> list[str]:
    """Why a report does not calibrate its judge; empty when it does."""
    if n == 0:
        return [
            f"nothing was judged (all {items} item(s) were skipped; see skipped_reasons), so "
            "agreement cannot be measured — this set calibrates nothing"
        ]
    if not kappa.defined or kappa.value is None or agreement is None:
        return [
            f"the human labels of the {n} judged item(s) are all one class, so chance-corrected "
            "agreement cannot be measured — this set calibrates nothing"
            + (f" (at least {MIN_JUDGED} judged items are needed)" if n < MIN_JUDGED else "")
        ]
    found = []
    if n < MIN_JUDGED:
        found.append(
            f"only {n} item(s) judged; at least {MIN_JUDGED} are needed (one label of each "
            "class is not enough)"
        )
    if items - n > MAX_SKIPPED_SHARE * items:
        found.append(f"{items - n} of {items} items unjudged (more than {MAX_SKIPPED_SHARE:.0%})")
    if agreement < targets.agreement:
        found.append(f"agreement {agreement:.3f} below the target {targets.agreement:.3f}")
    if kappa.value < targets.kappa:
        found.append(f"kappa {kappa.value:.3f} below the target {targets.kappa:.3f}")
    return found


def _verdict_text(shortfalls: list[str], kappa: Kappa, agreement: float | None) -> str:
    if not shortfalls:
        return f"calibrated: agreement {agreement:.3f}, kappa {kappa.value:.3f}"
    return "not calibrated: " + "; ".join(shortfalls)


def _ratchet(targets: Targets, passed: bool, agreement_lo: float | None, kappa: Kappa) -> Targets:
    if not passed:
        return targets
    return Targets(
        agreement=max(targets.agreement, agreement_lo or 0.0),
        kappa=max(targets.kappa, kappa.lo if kappa.lo is not None else -1.0),
    )


def measure(
    items: Sequence[CalibrationItem],
    verdicts: Sequence[Verdict],
    *,
    report_id: str,
    targets: Targets,
    judge: JudgePin,
    calibration_set: str,
    now: datetime | None = None,
) -> CalibrationReport:
    """Measure the judge's verdicts against the human labels (positive class: `pass`).

    Skipped verdicts are excluded from every denominator and counted with their reasons.
    """
    judged = [
        (item.label == "pass", verdict.status == "pass", len(item.output))
        for item, verdict in zip(items, verdicts, strict=True)
        if verdict.status != "skipped"
    ]
    skipped_reasons: dict[str, int] = {}
    for verdict in verdicts:
        if verdict.status == "skipped":
            skipped_reasons[verdict.reason] = skipped_reasons.get(verdict.reason, 0) + 1
    tp = sum(1 for human, machine, _ in judged if human and machine)
    fn = sum(1 for human, machine, _ in judged if human and not machine)
    fp = sum(1 for human, machine, _ in judged if not human and machine)
    tn = sum(1 for human, machine, _ in judged if not human and not machine)
    n = len(judged)
    agreement = Rate.of(tp + tn, n)
    kappa = cohens_kappa([[tp, fn], [fp, tn]])
    bias = pearson(
        [float(length) for _, _, length in judged], [float(machine) for _, machine, _ in judged]
    )
    shortfalls = _shortfalls(n, len(items), agreement.rate, kappa, targets)
    passed = not shortfalls
    return CalibrationReport(
        report_id=report_id,
        calibration_set=calibration_set,
        set_hash=set_hash(items),
        n=n,
        items=len(items),
        skipped=len(items) - n,
        skipped_reasons=skipped_reasons,
        agreement=agreement,
        kappa=KappaResult(value=kappa.value, lo=kappa.lo, hi=kappa.hi, defined=kappa.defined),
        sensitivity=Sensitivity.of(tp, tp + fn, tp=tp, positives=tp + fn),
        specificity=Specificity.of(tn, tn + fp, tn=tn, negatives=tn + fp),
        verbosity_bias=VerbosityBias(r=bias.r, p=bias.p, n=bias.n),
        targets=targets,
        ratcheted_targets=_ratchet(targets, passed, agreement.lo, kappa),
        passed=passed,
        verdict=_verdict_text(shortfalls, kappa, agreement.rate),
        judge=judge,
        at=now or datetime.now(UTC),
        item_verdicts=[
            ItemVerdict(
                label=1 if item.label == "pass" else 0,
                verdict=None if verdict.status == "skipped" else int(verdict.status == "pass"),
            )
            for item, verdict in zip(items, verdicts, strict=True)
        ],
    )


def judge_key(judge: JudgePin) -> str:
    """Store-safe key of a (model pin, prompt version) pair."""
    return content_hash(judge.model_dump(mode="json")).removeprefix("sha256:")[:32]


_REPORTS_PREFIX: Final = "calibration/reports/"


def _report_prefix(judge: JudgePin) -> str:
    return f"{_REPORTS_PREFIX}{judge_key(judge)}/"


def record_report(store: EvidenceStore, report: CalibrationReport) -> None:
    """Write the report (write-once) and, when it raised them, the new targets."""
    stamp = report.at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    store.put_once(
        f"{_report_prefix(report.judge)}{stamp}-{report.report_id}.json",
        report.model_dump_json().encode(),
    )
    if report.ratcheted_targets != report.targets:
        _append_targets(store, report.ratcheted_targets)


def reports(store: EvidenceStore, judge: JudgePin | None = None) -> list[CalibrationReport]:
    """Every report for one judge (oldest first), or for every judge when `judge` is None."""
    prefix = _REPORTS_PREFIX if judge is None else _report_prefix(judge)
    return [
        CalibrationReport.model_validate_json(store.get(key)) for key in sorted(store.list(prefix))
    ]


def is_calibrated(store: EvidenceStore, judge: JudgePin) -> bool:
    """Whether the latest calibration report for this exact judge passed."""
    found = reports(store, judge)
    return bool(found) and found[-1].passed


_TARGETS_PREFIX: Final = "calibration/targets/"


def current_targets(store: EvidenceStore) -> Targets:
    """The latest ratcheted targets, or the starting ones."""
    keys = sorted(store.list(_TARGETS_PREFIX))
    if not keys:
        return Targets()
    return Targets.model_validate_json(store.get(keys[-1]))


def _append_targets(store: EvidenceStore, raised: Targets) -> None:
    """Append targets at least as high as the latest ones, whatever was appended meanwhile.

    Two calibrations may run at once: each merges its raise into the latest record (the maximum
    of each target) and takes the next number; if another took it first, it reads and merges
    again. So no write ever lowers a target and no raise is lost.
    """
    while True:
        keys = sorted(store.list(_TARGETS_PREFIX))
        latest = Targets.model_validate_json(store.get(keys[-1])) if keys else Targets()
        merged = Targets(
            agreement=max(latest.agreement, raised.agreement),
            kappa=max(latest.kappa, raised.kappa),
        )
        if merged == latest and keys:
            return
        number = int(keys[-1].rsplit("/", 1)[-1].removesuffix(".json")) + 1 if keys else 1
        data = json.dumps(merged.model_dump()).encode()
        if store.put_once_if_absent(f"{_TARGETS_PREFIX}{number:06d}.json", data):
            return
