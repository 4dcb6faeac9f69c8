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

import hashlib
import json
import os
from collections.abc import Collection, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from assay.canonical import content_hash
from assay.errors import InputError, shown
from assay.jsonl import parse_record
from assay.judge.port import Verdict
from assay.outputs import index_outputs, read_slice
from assay.scorers import clamp
from assay.scorers.judge import LlmJudgeConfig
from assay.stats import Kappa, cohens_kappa, pearson, wilson
from assay.store import EvidenceStore
from assay.suites import Suite

CONTENT_LIMIT: Final = 4000
"""Characters kept of each opted-in text field (input, output, rubric, expected)."""

MIN_JUDGED: Final = 30
"""Judged items a report needs before it can calibrate anything (below, every interval is wide
enough to hold a useless judge: 2 agreeing items give agreement 1.0 with a 95% CI of 0.34–1)."""
MAX_SKIPPED_SHARE: Final = 0.10
"""Unjudged items a report may have: past this, the judge was measured on a biased remainder."""
DEFAULT_AGREEMENT: Final = 0.85
DEFAULT_KAPPA: Final = 0.6

Label = Literal["pass", "fail"]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]


class CalibrationItem(BaseModel):
    """One human-labelled item: the case, the output, and a person's pass/fail."""

    model_config = ConfigDict(extra="forbid")

    item_id: NonEmpty
    input: str
    output: str = Field(repr=False)
    rubric: NonEmpty
    expected: str | None = None
    label: Label
    labeler: NonEmpty
    labeled_at: datetime

    def clamped(self) -> CalibrationItem:
        """The item with every text field cut to `CONTENT_LIMIT` characters (before writing)."""
        return self.model_copy(
            update={
                "input": clamp(self.input, CONTENT_LIMIT),
                "output": clamp(self.output, CONTENT_LIMIT),
                "rubric": clamp(self.rubric, CONTENT_LIMIT),
                "expected": None if self.expected is None else clamp(self.expected, CONTENT_LIMIT),
            }
        )


def load_set(path: str | Path) -> list[CalibrationItem]:
    """Read a calibration set; malformed lines and repeated item ids name file and line."""
    source = str(path)
    items: list[CalibrationItem] = []
    seen: dict[str, int] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").split("\n")
    except OSError as exc:
        raise InputError(source, f"cannot read the calibration set ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise InputError(source, "the calibration set is not UTF-8 text") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        item = parse_record(CalibrationItem, line, source, number)
        if item.item_id in seen:
            raise InputError(
                source,
                f"item {shown(item.item_id)} was already labelled on line {seen[item.item_id]}",
                line=number,
                field="item_id",
            )
        seen[item.item_id] = number
        items.append(item)
    return items


def append_item(path: str | Path, item: CalibrationItem) -> None:
    """Append one clamped item to a set (durably: the line is on disk when this returns)."""
    line = item.clamped().model_dump_json() + "\n"
    with Path(path).open("a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())


class LabelTask(BaseModel):
    """One judged check of a suite case with its output, waiting for a person's label."""

    item_id: str
    input: str
    expected: str | None
    rubric: str
    output: str = Field(repr=False)

    def labelled(self, label: Label, labeler: str, now: datetime | None = None) -> CalibrationItem:
        """The calibration item a person's label turns this task into."""
        return CalibrationItem(
            item_id=self.item_id,
            input=self.input,
            output=self.output,
            rubric=self.rubric,
            expected=self.expected,
            label=label,
            labeler=labeler,
            labeled_at=now or datetime.now(UTC),
        )


def tasks_to_label(suite: Suite, outputs: str, done: Collection[str]) -> Iterator[LabelTask]:
    """Every `llm_judge` check of the suite that has an output and no label in `done`, in order.

    The item id is `<case id>#<check position>@<first 12 hex of the output's SHA-256>`, so the
    same case with another agent's output is another item, and a resumed session skips exactly
    what was labelled.
    """
    judged = {
        case.id: [
            (position, spec.config.rubric)
            for position, spec in enumerate(suite.scorers_for(case))
            if isinstance(spec.config, LlmJudgeConfig)
        ]
        for case in suite.cases
    }
    wanted = [case_id for case_id, checks in judged.items() if checks]
    if not wanted:
        raise InputError(suite.suite, "the suite has no llm_judge checks: nothing to calibrate")
    cases = {case.id: case for case in suite.cases}
    index = index_outputs(outputs, cases.keys(), wanted, chunk_size=1000)
    for piece in index.slices:
        for output in read_slice(piece, set(wanted)):
            digest = hashlib.sha256(output.output.encode()).hexdigest()[:12]
            case = cases[output.case_id]
            for position, rubric in judged[case.id]:
                item_id = f"{case.id}#{position}@{digest}"
                if item_id not in done:
                    yield LabelTask(
                        item_id=item_id,
                        input=case.input,
                        expected=case.expected,
                        rubric=rubric,
                        output=output.output,
                    )


class Rate(BaseModel):
    """A proportion with its Wilson 95% interval (None when the denominator is 0)."""

    rate: float | None
    lo: float | None
    hi: float | None


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


class JudgePin(BaseModel):
    """Which judge was calibrated: the model pin and the prompt version."""

    model: str
    prompt_version: str


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


def _rate(successes: int, n: int) -> tuple[float | None, float | None, float | None]:
    interval = wilson(successes, n)
    if interval is None:
        return None, None, None
    return successes / n, interval.lo, interval.hi


def set_hash(items: Sequence[CalibrationItem]) -> str:
    """Content hash of the labelled set (ids, labels and text), to tell sets apart in reports."""
    return content_hash([item.model_dump(mode="json") for item in items])


def _shortfalls(
    n: int, items: int, agreement: float | None, kappa: Kappa, targets: Targets
) -> list[str]:
    """Why a report does not calibrate its judge; empty when it does."""
    if not kappa.defined or kappa.value is None or agreement is None:
        return [
            "the human labels are all one class (or nothing was judged), so chance-corrected "
            "agreement cannot be measured — this set calibrates nothing"
        ]
    found = []
    if n < MIN_JUDGED:
        found.append(f"only {n} item(s) judged; at least {MIN_JUDGED} are needed")
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
    agreement = _rate(tp + tn, n)
    kappa = cohens_kappa([[tp, fn], [fp, tn]])
    bias = pearson(
        [float(length) for _, _, length in judged], [float(machine) for _, machine, _ in judged]
    )
    shortfalls = _shortfalls(n, len(items), agreement[0], kappa, targets)
    passed = not shortfalls
    return CalibrationReport(
        report_id=report_id,
        calibration_set=calibration_set,
        set_hash=set_hash(items),
        n=n,
        items=len(items),
        skipped=len(items) - n,
        skipped_reasons=skipped_reasons,
        agreement=Rate(rate=agreement[0], lo=agreement[1], hi=agreement[2]),
        kappa=KappaResult(value=kappa.value, lo=kappa.lo, hi=kappa.hi, defined=kappa.defined),
        sensitivity=Sensitivity(**_named_rate(tp, tp + fn), tp=tp, positives=tp + fn),
        specificity=Specificity(**_named_rate(tn, tn + fp), tn=tn, negatives=tn + fp),
        verbosity_bias=VerbosityBias(r=bias.r, p=bias.p, n=bias.n),
        targets=targets,
        ratcheted_targets=_ratchet(targets, passed, agreement[1], kappa),
        passed=passed,
        verdict=_verdict_text(shortfalls, kappa, agreement[0]),
        judge=judge,
        at=now or datetime.now(UTC),
    )


def _named_rate(successes: int, n: int) -> dict[str, float | None]:
    rate, lo, hi = _rate(successes, n)
    return {"rate": rate, "lo": lo, "hi": hi}


# ---------------------------------------------------------------- evidence


def judge_key(judge: JudgePin) -> str:
    """Store-safe key of a (model pin, prompt version) pair."""
    return content_hash(judge.model_dump(mode="json")).removeprefix("sha256:")[:32]


def _report_prefix(judge: JudgePin) -> str:
    return f"calibration/reports/{judge_key(judge)}/"


def record_report(store: EvidenceStore, report: CalibrationReport) -> None:
    """Write the report (write-once) and, when it raised them, the new targets."""
    stamp = report.at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    store.put_once(
        f"{_report_prefix(report.judge)}{stamp}-{report.report_id}.json",
        report.model_dump_json().encode(),
    )
    if report.ratcheted_targets != report.targets:
        _append_targets(store, report.ratcheted_targets)


def reports(store: EvidenceStore, judge: JudgePin) -> list[CalibrationReport]:
    """Every report for one judge, oldest first."""
    return [
        CalibrationReport.model_validate_json(store.get(key))
        for key in sorted(store.list(_report_prefix(judge)))
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
