"""Trial evidence records (SPEC §12): one JSON object per line, validated line by line.

A trial row carries enough to reproduce every numerator, denominator, exclusion and unavailable
state of the release signals. Two kinds of gap are kept apart on purpose:

- a row that is malformed (bad JSON, a missing required field, an unknown verdict word, a
  negative cost, counts that contradict each other) is an *input error* naming file and line;
- a claimed completion whose `outcome` is null, or a tool call with no verdict, is *evidence
  missing*: the row is valid and the gap fails the `coverage` gate instead.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationInfo,
    field_validator,
)

from assay import schemes
from assay.errors import InputError
from assay.jsonl import FirstLines, parse_record
from assay.outputs.sources import OutputSource

TrialVerdict = Literal["verified", "failed", "unknown", "declined"]
"""Destination evidence for one tool call; `declined` is a boundary that held, not a failure."""
ClaimOutcome = Literal["verified", "failed", "unavailable"]
"""Verdict on a claimed completion; `unavailable` means no verdict was possible (a coverage
defect, never a success and never a zero)."""
CostStatus = Literal["measured", "estimated", "missing"]

Text = Annotated[str, Field(min_length=1)]


class _Record(BaseModel):
    # Harnesses add their own metadata (latency, tokens); it is ignored, never stored.
    model_config = ConfigDict(extra="ignore", frozen=True)


class Quality(_Record):
    """The task-quality grade of one trial: a score in [0, 1] when a grader ran."""

    status: Literal["graded", "not_graded"]
    score: float | None = Field(default=None, ge=0.0, le=1.0, validate_default=True)
    grader: str | None = None

    @field_validator("score")
    @classmethod
    def _score_matches_status(cls, score: float | None, info: ValidationInfo) -> float | None:
        status = info.data.get("status")
        if status == "graded" and score is None:
            raise ValueError("a graded trial needs a score")
        if status == "not_graded" and score is not None:
            raise ValueError("a not_graded trial has no score")
        return score


class Wait(_Record):
    """An explicit wait: someone owns a pending decision that expires, and the run can resume.

    All four fields are required: a wait without them is not explicit, so it is rejected rather
    than silently excusing a stuck run. `expires_at` must carry a timezone, since it is
    compared with the evaluation time (see `assay.release.signals.active_windows`).
    """

    owner: Text
    decision: Text
    expires_at: AwareDatetime
    resume_state: Text


class Progress(_Record):
    """Observation windows of one trial, and the explicit wait it is paused in, if any.

    While the wait is live, the trial's windows without delta are waiting, not stuck (the
    signals leave them out of the active windows); once it has expired they count again.
    """

    active_windows: int = Field(ge=0)
    windows_with_delta: int = Field(ge=0)
    wait: Wait | None = None

    @field_validator("windows_with_delta")
    @classmethod
    def _within_active(cls, with_delta: int, info: ValidationInfo) -> int:
        active = info.data.get("active_windows")
        if active is not None and with_delta > active:
            raise ValueError(f"{with_delta} windows with delta but only {active} active windows")
        return with_delta


class ToolEffect(_Record):
    """One attempted tool call and what the destination says happened; None = no verdict."""

    call: Text
    verdict: TrialVerdict | None = None


class Trial(_Record):
    """One trial of one variant: quality, progress, tool effects, cost and the completion claim."""

    trial_id: Text
    variant: Text
    task_class: str | None = None
    quality: Quality
    progress: Progress
    tool_effects: list[ToolEffect]
    cost_usd: float | None = Field(default=None, ge=0.0)
    cost_status: CostStatus
    claimed_completion: StrictBool
    outcome: ClaimOutcome | None
    """Required (explicit null when no completion was claimed); null on a claimed completion is
    missing evidence, which the coverage gate catches."""

    @field_validator("cost_status")
    @classmethod
    def _cost_matches_status(cls, status: CostStatus, info: ValidationInfo) -> CostStatus:
        has_cost = info.data.get("cost_usd") is not None
        if status == "missing" and has_cost:
            raise ValueError("cost_status is missing but cost_usd is given")
        if status != "missing" and not has_cost and "cost_usd" in info.data:
            raise ValueError(f"cost_status is {status} but cost_usd is null")
        return status

    @field_validator("outcome")
    @classmethod
    def _outcome_needs_claim(
        cls, outcome: ClaimOutcome | None, info: ValidationInfo
    ) -> ClaimOutcome | None:
        if outcome is not None and info.data.get("claimed_completion") is False:
            raise ValueError("an outcome is only recorded for a claimed completion (use null)")
        return outcome


def parse_trial(raw: bytes, source: str, line: int) -> Trial:
    """Validate one JSONL line; errors name file, line and field and never echo the row."""
    return parse_record(Trial, raw, source, line)


def _read(uri: str) -> bytes:
    """The whole trials object: a local file or one `s3://bucket/key` object."""
    return b"".join(OutputSource(schemes.one_object(uri, "trials")).blocks())


def load_trials(uri: str) -> list[Trial]:
    """Read and validate a trials JSONL file (local path or `s3://` URI), in file order.

    Raises:
        InputError: malformed line, invalid field, duplicate trial id or no trials at all,
            naming the file, the line and the field.
    """
    trials: list[Trial] = []
    first_lines = FirstLines(uri, "trial id", "trial_id")
    for number, raw in enumerate(_read(uri).split(b"\n"), start=1):
        if not raw.strip():
            continue
        trial = parse_trial(raw, uri, number)
        first_lines.claim(trial.trial_id, number)
        trials.append(trial)
    if not trials:
        raise InputError(uri, "no trials: the file holds no JSON lines")
    return trials
