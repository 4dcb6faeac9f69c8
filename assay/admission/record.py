"""Admission records: append-only evidence that one judge fingerprint may (or may not) gate.

Records live under `admission/records/<fingerprint key>/<stamp>-<admission id>.json`, written
once and never rewritten; the latest record of a fingerprint is the judge's admission state.
The fingerprint is the judge pin (model pin, prompt version — which carries the versions of the
rubric texts it reads) and the battery version: a new model, prompt, rubric template or battery
starts not admitted. A record holds figures and ids only: no case, output or canary text.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

from assay.calibration.report import KappaResult
from assay.canonical import content_hash
from assay.judge.agreement import JuryAgreement
from assay.judge.port import JudgePin
from assay.rate import Rate, rate_text
from assay.store import EvidenceStore

_RECORDS_PREFIX: Final = "admission/records/"


class Fingerprint(BaseModel):
    """What an admission holds for: the judge pin and the battery version."""

    model_config = ConfigDict(frozen=True)

    judge: JudgePin
    battery_version: str

    @property
    def key(self) -> str:
        """Store-safe key of the fingerprint."""
        return content_hash(self.model_dump(mode="json")).removeprefix("sha256:")[:32]


class FlipRate(Rate):
    """Verdicts that changed when they must not have: `flips` of `n` judged probes (95% Wilson
    interval), against the battery's limit; `unjudged` probes (a verdict skipped) are outside n."""

    flips: int
    n: int
    unjudged: int
    limit: float
    passed: bool


class CanaryResult(Rate):
    """Injection canaries the judge passed (each one a wrong answer): `steered` of `n` judged,
    by canary id — never its text."""

    steered: int
    n: int
    unjudged: int
    steered_ids: list[str]
    limit: int
    passed: bool


SelfPreferenceStatus = Literal["not_declared", "different", "same_refused", "same_allowed"]


class SelfPreference(BaseModel):
    """The subject's declared model against the judge's model pin.

    `same_refused` fails admission; `same_allowed` is the recorded explicit opt-in
    (`--allow-self-judging`).
    """

    subject_model: str | None
    status: SelfPreferenceStatus

    @property
    def passed(self) -> bool:
        return self.status != "same_refused"


class CalibrationState(BaseModel):
    """The calibration report admission read (the judge's latest one for its pin)."""

    report_id: str | None
    passed: bool
    agreement: Rate | None
    n: int
    verdict: str
    kappa: KappaResult | None = None
    """Cohen's kappa with its 95% interval (None in a record written before it was kept)."""


class AdmissionRecord(BaseModel):
    """One admission attempt for one fingerprint (append-only; figures and ids only).

    Attributes:
        admitted: Every part passed: calibration, position, verbosity, self-preference, canaries.
        failed: The parts that did not pass, in that order (empty when admitted).
    """

    admission_id: str
    fingerprint: Fingerprint
    fingerprint_key: str
    calibration: CalibrationState
    position: FlipRate
    verbosity: FlipRate
    self_preference: SelfPreference
    canaries: CanaryResult
    jury: JuryAgreement | None = None
    """A jury's: its jurors' agreement (Krippendorff's alpha, effective votes) on the grading
    probes; None for a single judge."""
    admitted: bool
    failed: list[str]
    at: datetime


def failed_parts(
    calibration: CalibrationState,
    position: FlipRate,
    verbosity: FlipRate,
    self_preference: SelfPreference,
    canaries: CanaryResult,
) -> list[str]:
    """The names of the parts that did not pass, in admission order."""
    parts = {
        "calibration": calibration.passed,
        "position": position.passed,
        "verbosity": verbosity.passed,
        "self_preference": self_preference.passed,
        "canaries": canaries.passed,
    }
    return [name for name, passed in parts.items() if not passed]


def record_admission(store: EvidenceStore, record: AdmissionRecord) -> None:
    """Append the record (write-once)."""
    stamp = record.at.astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    key = f"{_RECORDS_PREFIX}{record.fingerprint_key}/{stamp}-{record.admission_id}.json"
    store.put_once(key, record.model_dump_json().encode())


def admissions(store: EvidenceStore, fingerprint: Fingerprint) -> list[AdmissionRecord]:
    """Every admission record of a fingerprint, oldest first."""
    prefix = f"{_RECORDS_PREFIX}{fingerprint.key}/"
    return [
        AdmissionRecord.model_validate_json(store.get(key)) for key in sorted(store.list(prefix))
    ]


class AdmissionState(BaseModel):
    """What the gate shows about a judge's admission: the latest record's outcome, or none."""

    fingerprint_key: str
    battery_version: str
    admitted: bool
    admission_id: str | None
    failed: list[str]
    summary: str
    record: AdmissionRecord | None = None
    """The latest record, whose figures the report, artifacts and PR comment show."""


def admission_state(store: EvidenceStore, fingerprint: Fingerprint) -> AdmissionState:
    """The judge's admission state: its latest record for this fingerprint decides."""
    found = admissions(store, fingerprint)
    if not found:
        return AdmissionState(
            fingerprint_key=fingerprint.key,
            battery_version=fingerprint.battery_version,
            admitted=False,
            admission_id=None,
            failed=[],
            summary=f"never admitted with battery {fingerprint.battery_version} "
            "(run `assay judge admit`)",
        )
    latest = found[-1]
    return AdmissionState(
        fingerprint_key=fingerprint.key,
        battery_version=fingerprint.battery_version,
        admitted=latest.admitted,
        admission_id=latest.admission_id,
        failed=latest.failed,
        summary=summary(latest),
        record=latest,
    )


def summary(record: AdmissionRecord) -> str:
    """One line: admitted or not, and each part's figure with n and its interval."""
    parts = [
        f"calibration {'passed' if record.calibration.passed else 'failed'}",
        f"position flips {_flip_text(record.position)}",
        f"verbosity flips {_flip_text(record.verbosity)}",
        f"self-preference {record.self_preference.status.replace('_', ' ')}",
        f"canaries steered {rate_text(record.canaries.steered, record.canaries.n)}"
        + (f" ({', '.join(record.canaries.steered_ids)})" if record.canaries.steered_ids else ""),
    ]
    if record.jury is not None:
        parts.append(jury_text(record.jury))
    head = "admitted" if record.admitted else f"not admitted ({', '.join(record.failed)} failed)"
    return f"{head}: " + "; ".join(parts)


def jury_text(jury: JuryAgreement) -> str:
    """A jury's agreement in a few words: its size and rule, alpha over its n items, votes."""

    def figure(value: float | None) -> str:
        return "undefined" if value is None else f"{value:.3f}"

    return (
        f"jury of {jury.jurors} ({jury.aggregation}): alpha {figure(jury.alpha_verdicts)} "
        f"(n={jury.items}), effective votes {figure(jury.effective_votes)}"
    )


def _flip_text(flips: FlipRate) -> str:
    return f"{rate_text(flips.flips, flips.n)} vs limit {flips.limit:g}"
