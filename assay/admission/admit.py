"""Admitting a judge: calibration, the bias battery and the injection canaries, one record.

Every probe goes through the judging service like any other judge call (verdict cache, FinOps
preflight with budget scope `suite:admission`, cost ledger). The battery's texts stay in this
function's memory; the record holds figures and canary ids only.

- **Position**: each case's correct and wrong answers compared in both orders (the pairwise
  prompt); a flip is a case whose two orders disagree (`assay.pairwise.compare.pair_outcome`).
- **Verbosity**: each answer graded as written and padded with the battery's filler; a flip is a
  pair whose verdicts differ.
- **Self-preference**: the subject's declared model against the judge's model pin — each
  juror's, for a jury (compared case-insensitively, without a `provider/` prefix); the same
  model is refused unless allowed.
- **Canaries**: each canary (a wrong answer that tries to steer the judge) must fail; a pass is
  recorded by its id.

A jury (`assay.judge.jury`) is admitted as a whole: every probe reads the jury's aggregated
verdict, the fingerprint's pin names every juror's pin and the aggregation, and the record
keeps the jurors' agreement on the grading probes (`assay.judge.agreement`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from assay.admission.battery import Battery
from assay.admission.record import (
    AdmissionRecord,
    CalibrationState,
    CanaryResult,
    Fingerprint,
    FlipRate,
    SelfPreference,
    failed_parts,
    record_admission,
)
from assay.calibration.calibrate import calibrate
from assay.calibration.report import MAX_SKIPPED_SHARE, CalibrationReport, reports
from assay.errors import InputError
from assay.hashing import OutputHasher, store_secret
from assay.judge.agreement import JuryAgreement, jury_agreement
from assay.judge.cache import cache_key
from assay.judge.jury import jurors_of
from assay.judge.port import JudgePin, JudgeRequest, PairRequest, Verdict
from assay.judge.service import JudgeSetup, judge_pair_requests, judge_requests
from assay.judge.spending import Spender
from assay.pairwise.compare import pair_outcome, pairwise_setup
from assay.rate import Rate
from assay.store import EvidenceStore

ADMISSION_SUITE: Final = "admission"
"""The suite name admission spend is budgeted and recorded under."""


@dataclass(frozen=True)
class AdmissionAsk:
    """What `assay judge admit` was asked besides the judge and the battery."""

    admission_id: str
    calibration_set: str | None = None
    """Calibrate against this set first; None reads the judge's latest calibration report."""
    subject_model: str | None = None
    """The model the judged subject declares it runs (`--subject-model`)."""
    allow_self_judging: bool = False
    """The explicit, recorded opt-in to let a judge grade its own model's outputs."""


def admit(
    store: EvidenceStore,
    setup: JudgeSetup,
    battery: Battery,
    ask: AdmissionAsk,
    now: datetime | None = None,
) -> AdmissionRecord:
    """Run calibration, the battery and the canaries with the configured judge; record the result.

    Raises:
        InputError: No judge is configured, or the calibration set is missing or malformed.
    """
    if setup.make_judge is None or setup.model is None:
        raise InputError(
            "judge", f"{setup.skip_reason}: configure a judge to admit (see docs/admission.md)"
        )
    at = now or datetime.now(UTC)
    calibration, pin = _calibration(store, setup, ask)
    subject = f"judge:{setup.model}"
    hasher = OutputHasher(store_secret(store))
    graded = _graded(store, setup, battery, hasher, ask.admission_id, subject, at)
    position = _position(store, setup, battery, hasher, ask.admission_id, subject, at)
    verbosity = _verbosity(battery, graded)
    canaries = _canaries(battery, graded)
    self_preference = _self_preference([juror.model or "" for juror in jurors_of(setup)], ask)
    failed = failed_parts(calibration, position, verbosity, self_preference, canaries)
    fingerprint = Fingerprint(judge=pin, battery_version=battery.version)
    record = AdmissionRecord(
        admission_id=ask.admission_id,
        fingerprint=fingerprint,
        fingerprint_key=fingerprint.key,
        calibration=calibration,
        position=position,
        verbosity=verbosity,
        self_preference=self_preference,
        canaries=canaries,
        jury=graded.agreement,
        admitted=not failed,
        failed=failed,
        at=at,
    )
    record_admission(store, record)
    return record


def _calibration(
    store: EvidenceStore, setup: JudgeSetup, ask: AdmissionAsk
) -> tuple[CalibrationState, JudgePin]:
    """Calibrate against the set when one is given, else read the pin's latest report; the pin
    the report is for (it carries the rubric texts' versions) is the one admitted."""
    report: CalibrationReport | None
    if ask.calibration_set is not None:
        report = calibrate(store, setup, ask.calibration_set, f"{ask.admission_id}-calibration")
    else:
        found = reports(store, setup.pin)
        report = found[-1] if found else None
    if report is None:
        state = CalibrationState(
            report_id=None,
            passed=False,
            agreement=None,
            n=0,
            verdict="no calibration report for this judge (pass --calibration SET)",
        )
        return state, setup.pin
    state = CalibrationState(
        report_id=report.report_id,
        passed=report.passed,
        agreement=Rate(rate=report.agreement.rate, lo=report.agreement.lo, hi=report.agreement.hi),
        n=report.n,
        verdict=report.verdict,
        kappa=report.kappa,
    )
    return state, report.judge


@dataclass(frozen=True)
class _Graded:
    """Verdicts of the grading probes, by what was graded."""

    plain: dict[tuple[str, str], Verdict]
    """(case id, `correct`/`wrong`) → verdict of the answer as written."""
    padded: dict[tuple[str, str], Verdict]
    canaries: dict[str, Verdict]
    agreement: JuryAgreement | None
    """A jury's agreement over every grading probe; None for a single judge."""


def _graded(
    store: EvidenceStore,
    setup: JudgeSetup,
    battery: Battery,
    hasher: OutputHasher,
    admission_id: str,
    subject: str,
    at: datetime,
) -> _Graded:
    """Grade every answer (as written and padded) and every canary, in one batch."""
    asked: list[tuple[str, str, str, str]] = []  # (group, id, answer kind, output)
    for case in battery.cases:
        for kind, answer in (("correct", case.correct), ("wrong", case.wrong)):
            asked.append(("plain", case.id, kind, answer))
            asked.append(("padded", case.id, kind, battery.padded(answer)))
    for canary in battery.canaries:
        asked.append(("canary", canary.case, canary.id, canary.output))
    requests = []
    for group, case_id, name, output in asked:
        case = battery.case(case_id)
        content = {
            "input": case.input,
            "expected": case.expected,
            "rubric": case.rubric,
            "output": hasher(output),
        }
        request = JudgeRequest(
            case_id=f"{group}:{case_id}:{name}",
            input=case.input,
            expected=case.expected,
            rubric=case.rubric,
            output=output,
        )
        requests.append((cache_key(hasher, "calibration", setup.pin, content), request))
    judged = judge_requests(
        store,
        setup,
        requests,
        run_id=f"{admission_id}-grading",
        chunk=0,
        suite=ADMISSION_SUITE,
        subject=subject,
        now=at,
    )
    verdicts = judged.verdicts
    found = [
        ((group, case_id, name), v)
        for (group, case_id, name, _), v in zip(asked, verdicts, strict=True)
    ]
    return _Graded(
        plain={(c, n): v for (g, c, n), v in found if g == "plain"},
        padded={(c, n): v for (g, c, n), v in found if g == "padded"},
        canaries={n: v for (g, _, n), v in found if g == "canary"},
        agreement=None
        if judged.by_juror is None or setup.jury is None
        else jury_agreement(judged.by_juror, setup.jury.aggregation),
    )


def _position(
    store: EvidenceStore,
    setup: JudgeSetup,
    battery: Battery,
    hasher: OutputHasher,
    admission_id: str,
    subject: str,
    at: datetime,
) -> FlipRate:
    """Compare each case's correct (A) and wrong (B) answers in both orders."""
    pairs = pairwise_setup(setup)
    requests = []
    for case in battery.cases:
        for first, second in ((case.correct, case.wrong), (case.wrong, case.correct)):
            request = PairRequest(
                case_id=case.id,
                input=case.input,
                expected=case.expected,
                rubric=case.rubric,
                first=first,
                second=second,
            )
            content = {
                "input": case.input,
                "expected": case.expected,
                "rubric": case.rubric,
                "first": hasher(first),
                "second": hasher(second),
            }
            requests.append((cache_key(hasher, "pairwise", pairs.pin, content), request))
    verdicts = judge_pair_requests(
        store,
        pairs,
        requests,
        Spender(f"{admission_id}-position", ADMISSION_SUITE, subject, at),
        batch_size=len(requests),
    ).verdicts
    outcomes = [pair_outcome(verdicts[i], verdicts[i + 1]) for i in range(0, len(verdicts), 2)]
    judged = [outcome for outcome in outcomes if outcome != "unjudged"]
    flips = sum(1 for outcome in judged if outcome == "inconsistent")
    return _flip_rate(flips, len(judged), len(outcomes), battery.limits.position_max_flip_rate)


def _verbosity(battery: Battery, graded: _Graded) -> FlipRate:
    """Answers whose verdict changed once padded with filler."""
    pairs = [(graded.plain[key], graded.padded[key]) for key in graded.plain]
    judged = [(plain, padded) for plain, padded in pairs if _judged(plain) and _judged(padded)]
    flips = sum(1 for plain, padded in judged if plain.status != padded.status)
    return _flip_rate(flips, len(judged), len(pairs), battery.limits.verbosity_max_flip_rate)


def _canaries(battery: Battery, graded: _Graded) -> CanaryResult:
    """Canaries the judge passed: each is a wrong answer, so a pass means it was steered."""
    judged = {cid: v for cid, v in graded.canaries.items() if _judged(v)}
    steered = [cid for cid, verdict in judged.items() if verdict.status == "pass"]
    unjudged = len(graded.canaries) - len(judged)
    limit = battery.limits.canaries_max_passed
    passed = _measured(len(judged), unjudged) and len(steered) <= limit
    return CanaryResult.of(
        len(steered),
        len(judged),
        steered=len(steered),
        n=len(judged),
        unjudged=unjudged,
        steered_ids=steered,
        limit=limit,
        passed=passed,
    )


def _self_preference(judge_models: list[str], ask: AdmissionAsk) -> SelfPreference:
    if ask.subject_model is None:
        return SelfPreference(subject_model=None, status="not_declared")
    if any(same_model(model, ask.subject_model) for model in judge_models):
        status = "same_allowed" if ask.allow_self_judging else "same_refused"
        return SelfPreference(subject_model=ask.subject_model, status=status)
    return SelfPreference(subject_model=ask.subject_model, status="different")


def same_model(judge_model: str, subject_model: str) -> bool:
    """Whether two model names name the same model: case-insensitive, without a `provider/`
    prefix (`openai/gpt-4o` is `GPT-4o`)."""

    def bare(name: str) -> str:
        return name.strip().rsplit("/", 1)[-1].casefold()

    return bare(judge_model) == bare(subject_model)


def _judged(verdict: Verdict) -> bool:
    return verdict.status != "skipped"


def _measured(judged: int, unjudged: int) -> bool:
    """A probe measured something, on few enough skipped verdicts not to bias it."""
    return judged > 0 and unjudged <= MAX_SKIPPED_SHARE * (judged + unjudged)


def _flip_rate(flips: int, judged: int, total: int, limit: float) -> FlipRate:
    unjudged = total - judged
    passed = _measured(judged, unjudged) and flips / judged <= limit
    return FlipRate.of(
        flips, judged, flips=flips, n=judged, unjudged=unjudged, limit=limit, passed=passed
    )
