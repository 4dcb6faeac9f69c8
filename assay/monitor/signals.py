"""Session signals (SPEC §13): one JSON line of numbers, states and timestamps — never text.

    {"session_id": "s-1", "subject": "agent:support-bot@v2", "state": "completed",
     "findings_count": 0, "max_severity": "none", "input_tokens": 1200, "output_tokens": 300,
     "cost_usd": 0.004, "started_at": "2026-06-01T10:00:00Z", "ended_at": "2026-06-01T10:02:10Z"}

Any other field is rejected with file and line (a transcript or response must never ride along
into a report), and the error never repeats the rejected value. Every field may be missing or
null: such a session is still counted, its missing fields are counted as *unknown*, and each rate
excludes the sessions it cannot judge — counted and shown, never guessed.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Final, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    field_validator,
    model_validator,
)

from assay import schemes
from assay.jsonl import numbered_lines, parse_record
from assay.outputs.sources import output_sources

State = Literal["completed", "failed", "abandoned", "running", "waiting"]

Severity = Literal["none", "low", "medium", "high", "critical"]

ENDED: Final[tuple[State, ...]] = ("completed", "failed", "abandoned")

SIGNAL_FIELDS: Final = (
    "session_id",
    "subject",
    "state",
    "findings_count",
    "max_severity",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "started_at",
    "ended_at",
)

# Identifiers are restricted to characters that cannot spell prose (no spaces, no punctuation
# beyond separators) and capped in length, so no free text can ride in them into the store.
_SESSION_ID: Final = r"^[A-Za-z0-9._:-]{1,64}$"

_PART: Final = r"[A-Za-z0-9._-]{1,64}"

_SUBJECT: Final = re.compile(rf"^[a-z][a-z0-9_-]{{0,31}}:{_PART}(@{_PART})?$")

SUBJECT_RULE: Final = (
    "must be KIND:ID[@VARIANT] (KIND lower-case letters, digits, _ and -, at most 32; ID and "
    "VARIANT letters, digits, ., _ and -, at most 64 each), e.g. agent:support-bot@v2"
)


def checked_subject(value: str) -> str:
    """`value` when it is a well-formed subject; raises ValueError (never echoing it) otherwise."""
    if _SUBJECT.match(value) is None:
        raise ValueError(SUBJECT_RULE)
    return value


class SessionSignal(BaseModel):
    """One live session's behavioural signals. No text fields exist; any extra field is an error.

    Every field is optional so that a partial record is counted (as unknown) rather than lost.
    Identifiers admit only letters, digits and a few separators, at most 64 per part, so no
    prose fits in them.
    """

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    session_id: Annotated[str, Field(pattern=_SESSION_ID)] | None = None
    subject: str | None = None
    """`KIND:ID[@VARIANT]`, e.g. `agent:support-bot@v2`."""
    state: State | None = None
    findings_count: NonNegativeInt | None = None
    max_severity: Severity | None = None
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    cost_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)] | None = None
    started_at: AwareDatetime | None = None
    ended_at: AwareDatetime | None = None

    @field_validator("subject")
    @classmethod
    def _subject_format(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return checked_subject(value)

    @model_validator(mode="after")
    def _consistent(self) -> SessionSignal:
        if self.started_at and self.ended_at and self.ended_at < self.started_at:
            raise ValueError("ended_at is before started_at")
        count, severity = self.findings_count, self.max_severity
        if count is not None and severity is not None and (count == 0) != (severity == "none"):
            raise ValueError(
                "findings_count and max_severity disagree (max_severity is none exactly "
                "when findings_count is 0)"
            )
        return self

    @property
    def at(self) -> datetime | None:
        """When the session counts: its end, or its start while it has not ended."""
        return self.ended_at or self.started_at

    @property
    def unknown_fields(self) -> list[str]:
        """Fields the record lacks. `ended_at` is expected only once a session has ended."""
        expected = [f for f in SIGNAL_FIELDS if f != "ended_at" or self.state in ENDED]
        return [f for f in expected if getattr(self, f) is None]

    @property
    def tokens(self) -> int | None:
        """Input plus output tokens, when both are known."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return self.input_tokens + self.output_tokens


def parse_signal(raw: bytes, source: str, line: int) -> SessionSignal:
    """Validate one JSONL line; errors name file, line and field and never echo a value.

    An extra field is reported first, whatever else is wrong: it is the one that could carry
    text, and the record is rejected before anything is stored.
    """
    return parse_record(
        SessionSignal,
        raw,
        source,
        line,
        unknown_field="not a session-signal field: signals carry no text, so the record is "
        f"rejected and nothing is stored (allowed: {', '.join(SIGNAL_FIELDS)})",
    )


class SignalCounts(BaseModel):
    """How the input's lines became sessions, and where each session fell."""

    lines: int = 0
    """Valid signal lines read."""
    superseded: int = 0
    """Lines replaced by a later line for the same subject and session id."""
    sessions: int = 0
    """Distinct sessions after that."""
    current: int = 0
    previous: int = 0
    outside: int = 0
    """Sessions older than the previous window, or at or after `now`."""
    undated: int = 0
    """Sessions with neither `ended_at` nor `started_at`: in no window."""
    unattributed: int = 0
    """Sessions without a subject: in no subject's figures."""


def read_signals(uri: str) -> tuple[list[SessionSignal], SignalCounts]:
    """Every session in a signals file, folder (`*.jsonl`) or `s3://` prefix; last line wins.

    Raises:
        InputError: a missing file, a malformed line, or a line with a field that is not a
            session signal — naming file and line.
    """
    sessions: dict[tuple[str | None, str], SessionSignal] = {}
    anonymous: list[SessionSignal] = []
    counts = SignalCounts()
    for source in output_sources(uri, what="signals", accepted=schemes.SHARED):
        for number, _start, _end, raw in numbered_lines(source.blocks()):
            signal = parse_signal(raw, source.name, number)
            counts.lines += 1
            if signal.session_id is None:
                anonymous.append(signal)
                continue
            key = (signal.subject, signal.session_id)
            if key in sessions:
                counts.superseded += 1
            sessions[key] = signal
    found = [*sessions.values(), *anonymous]
    counts.sessions = len(found)
    return found, counts
