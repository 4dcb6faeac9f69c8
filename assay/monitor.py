"""Live-session monitoring (SPEC §13): session health per subject from behavioural signals only.

A session signal is one JSON line of numbers, states and timestamps — never text:

    {"session_id": "s-1", "subject": "agent:support-bot@v2", "state": "completed",
     "findings_count": 0, "max_severity": "none", "input_tokens": 1200, "output_tokens": 300,
     "cost_usd": 0.004, "started_at": "2026-06-01T10:00:00Z", "ended_at": "2026-06-01T10:02:10Z"}

Any other field is rejected with file and line (a transcript or response must never ride along
into a report), and the error never repeats the rejected value. Every field may be missing or
null: such a session is still counted, its missing fields are counted as *unknown*, and each rate
excludes the sessions it cannot judge — counted and shown, never guessed.

Windows. A session belongs to the moment it ended (`ended_at`), or, while it has not ended, the
moment it started (`started_at`). The current window is [now − window, now); the previous window
is the same length just before it. A session with neither timestamp cannot be placed and is
counted as undated. When a session id appears more than once for a subject, the last line wins:
signal feeds report a session again as it moves from `running` to `completed`.

Per subject and window: completion and failure rates over the sessions that ended (completed,
failed, abandoned; `running` and `waiting` are counted apart and shown), and over the same ended
sessions the share whose most severe finding is high or critical, cost per completed session and
tokens per session (median and p95), since a live session's figures are still moving. Rates come
with 95% Wilson intervals, changes against the previous window with Newcombe intervals. Crossing
a `MonitorThresholds` limit gives one `monitor_threshold` Finding per subject. A subject without
signals in the window is `no_data`; one with sessions but none known to have ended (only live
sessions, or no states) is `insufficient`: absent signals prove nothing, so neither is ever
reported as healthy. An expected subject, or one measured in the previous window, that has
nothing measurable now gives a `monitor_no_data` Finding.

Nothing here imports Prefect.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
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

from assay.errors import InputError
from assay.findings import Finding
from assay.jsonl import numbered_lines, parse_record
from assay.outputs import output_sources
from assay.runs.render import rate_text
from assay.stats import newcombe_diff, wilson
from assay.store import EvidenceStore

REPORT_PREFIX: Final = "monitor/"
FINDING_KIND: Final = "monitor_threshold"
NO_DATA_KIND: Final = "monitor_no_data"
ABSENCE_NOTE: Final = (
    "Absent signals prove nothing: a subject with no signals in the window is reported as "
    "no data, never as healthy, and these figures describe only the sessions that sent signals."
)

State = Literal["completed", "failed", "abandoned", "running", "waiting"]
Severity = Literal["none", "low", "medium", "high", "critical"]
Status = Literal["ok", "no_data", "insufficient", "alert"]

ENDED: Final[tuple[State, ...]] = ("completed", "failed", "abandoned")
HIGH: Final[tuple[Severity, ...]] = ("high", "critical")
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

_WINDOW = re.compile(r"^([1-9][0-9]{0,6})([mhd])$")
_WINDOW_UNITS: Final = {"m": "minutes", "h": "hours", "d": "days"}
MAX_WINDOW: Final = timedelta(days=3650)
"""Ten years: longer windows are surely a typo, and would leave the calendar's range."""

# Identifiers are restricted to characters that cannot spell prose (no spaces, no punctuation
# beyond separators) and capped in length, so no free text can ride in them into the store.
_SESSION_ID: Final = r"^[A-Za-z0-9._:-]{1,64}$"
_PART: Final = r"[A-Za-z0-9._-]{1,64}"
_SUBJECT: Final = re.compile(rf"^[a-z][a-z0-9_-]{{0,31}}:{_PART}(@{_PART})?$")
SUBJECT_RULE: Final = (
    "must be KIND:ID[@VARIANT] (KIND lower-case letters, digits, _ and -, at most 32; ID and "
    "VARIANT letters, digits, ., _ and -, at most 64 each), e.g. agent:support-bot@v2"
)


# --- the signal record -------------------------------------------------------------------------


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
    if not uri.startswith("s3://") and not Path(uri.removeprefix("file://")).exists():
        raise InputError(uri, "no such signals file or folder")
    sessions: dict[tuple[str | None, str], SessionSignal] = {}
    anonymous: list[SessionSignal] = []
    counts = SignalCounts()
    for source in output_sources(uri):
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


# --- windows -----------------------------------------------------------------------------------


def parse_window(text: str) -> timedelta:
    """`30m`, `6h`, `24h`, `7d` → a duration of at most `MAX_WINDOW`; else an input error."""
    match = _WINDOW.match(text.strip())
    if match is None:
        raise InputError("--window", "use a whole number and a unit m, h or d (30m, 6h, 24h, 7d)")
    length = timedelta(**{_WINDOW_UNITS[match[2]]: int(match[1])})
    if length > MAX_WINDOW:
        raise InputError("--window", f"at most {MAX_WINDOW.days}d")
    return length


def parse_now(text: str | None) -> datetime:
    """An ISO 8601 instant (a time without an offset is read as UTC); None is the present."""
    if text is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InputError("--now", "not an ISO 8601 time (e.g. 2026-06-02T00:00:00Z)") from None
    return utc(moment)


def utc(moment: datetime) -> datetime:
    """The same instant in UTC; a time without an offset is read as UTC."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).astimezone(UTC)


class Window(BaseModel):
    """A half-open interval [start, end) of session times."""

    start: AwareDatetime
    end: AwareDatetime

    def holds(self, moment: datetime) -> bool:
        """Whether `moment` falls in [start, end)."""
        return self.start <= moment < self.end


def windows(window: str, now: datetime) -> tuple[Window, Window]:
    """The current window [now − window, now) and the previous one of the same length.

    Raises:
        InputError: a malformed or too long window, or a `now` so early that the previous
            window would start before the calendar does.
    """
    length = parse_window(window)
    end = utc(now)
    try:
        start = end - 2 * length
    except OverflowError:
        raise InputError("--now", f"too early for two {window} windows before it") from None
    return Window(start=start + length, end=end), Window(start=start, end=start + length)


# --- figures -----------------------------------------------------------------------------------


class Rate(BaseModel):
    """A rate with its 95% Wilson interval; `rate`, `lo` and `hi` are None when `n` is 0."""

    rate: float | None
    n: int
    """The denominator."""
    lo: float | None
    hi: float | None


class Completion(Rate):
    """Completed sessions over sessions that ended (completed, failed or abandoned)."""

    completed: int


class Failure(Rate):
    """Failed sessions over sessions that ended."""

    failed: int


class HighSeverity(Rate):
    """Ended sessions whose most severe finding was high or critical, over ended sessions with a
    known `max_severity`. A live session's severity is provisional (it can still rise), so it is
    in no denominator; live sessions already at high or critical are counted apart."""

    flagged: int
    not_ended_flagged: int


def _rate_fields(k: int, n: int) -> dict[str, float | int | None]:
    interval = wilson(k, n)
    return {
        "rate": k / n if n else None,
        "n": n,
        "lo": interval.lo if interval else None,
        "hi": interval.hi if interval else None,
    }


class CostPerCompleted(BaseModel):
    """Known cost of the window's *ended* sessions (failed and abandoned ones too: they are part
    of the price of completing) over completed sessions. `value` is None without a completed or
    a costed session; with `uncosted` > 0 it is a lower bound.

    Sessions that have not ended (running, waiting, or of unknown state) are left out: their
    spend so far is partial, and a burst of them would inflate the figure. Their known spend is
    reported apart as `not_ended_usd`.
    """

    value: float | None
    total_usd: float
    """Known cost of the ended sessions: the numerator."""
    completed: int
    costed: int
    """Ended sessions that reported a cost."""
    uncosted: int
    """Ended sessions that reported none."""
    not_ended: int
    """Sessions running, waiting or of unknown state: in neither numerator nor denominator."""
    not_ended_usd: float
    """Their known spend so far."""


class Tokens(BaseModel):
    """Input plus output tokens per session over the `n` ended sessions that reported both
    (a live session's count is still growing)."""

    median: float | None
    p95: float | None
    n: int


class Unknown(BaseModel):
    """Sessions with at least one missing field, and how often each field was missing."""

    sessions: int
    fields: dict[str, int]


class WindowStats(BaseModel):
    """One subject's figures over one window."""

    sessions: int
    unknown: Unknown
    states: dict[str, int]
    """Sessions per state (`running` and `waiting` are in no rate's denominator)."""
    completion: Completion
    failure: Failure
    high_severity: HighSeverity
    cost_per_completed: CostPerCompleted
    tokens: Tokens

    @property
    def measurable(self) -> bool:
        """Whether any figure has a denominator: every one is over ended sessions."""
        return self.completion.n > 0

    @property
    def unknown_state(self) -> int:
        """Sessions without a `state`: in no state's count."""
        return self.sessions - sum(self.states.values())


def window_stats(sessions: Sequence[SessionSignal]) -> WindowStats:
    """The figures for one subject's sessions in one window."""
    states = Counter(s.state for s in sessions if s.state is not None)
    finished = [s for s in sessions if s.state in ENDED]
    unfinished = [s for s in sessions if s.state not in ENDED]
    ended = len(finished)
    severities = [s.max_severity for s in finished if s.max_severity is not None]
    flagged = sum(1 for severity in severities if severity in HIGH)
    costs = [s.cost_usd for s in finished if s.cost_usd is not None]
    completed = states["completed"]
    total = float(sum(costs))
    missing = [s.unknown_fields for s in sessions]
    return WindowStats(
        sessions=len(sessions),
        unknown=Unknown(
            sessions=sum(1 for fields in missing if fields),
            fields=dict(sorted(Counter(f for fields in missing for f in fields).items())),
        ),
        states={state: states[state] for state in (*ENDED, "running", "waiting")},
        completion=Completion(completed=completed, **_rate_fields(completed, ended)),
        failure=Failure(failed=states["failed"], **_rate_fields(states["failed"], ended)),
        high_severity=HighSeverity(
            flagged=flagged,
            not_ended_flagged=sum(1 for s in unfinished if s.max_severity in HIGH),
            **_rate_fields(flagged, len(severities)),
        ),
        cost_per_completed=CostPerCompleted(
            value=total / completed if completed and costs else None,
            total_usd=total,
            completed=completed,
            costed=len(costs),
            uncosted=ended - len(costs),
            not_ended=len(unfinished),
            not_ended_usd=float(sum(s.cost_usd for s in unfinished if s.cost_usd is not None)),
        ),
        tokens=_tokens([t for t in (s.tokens for s in finished) if t is not None]),
    )


def _tokens(per_session: list[int]) -> Tokens:
    if not per_session:
        return Tokens(median=None, p95=None, n=0)
    import numpy as np  # only when there are tokens to summarise: keeps `assay` start-up lean

    median, p95 = np.percentile(per_session, [50, 95])  # linear interpolation between ranks
    return Tokens(median=float(median), p95=float(p95), n=len(per_session))


class RateChange(BaseModel):
    """Current minus previous rate, with the 95% Newcombe hybrid-score interval."""

    diff: float
    lo: float
    hi: float


class Change(BaseModel):
    """The current window against the previous one; None where either side has no figure.

    Rates change in absolute terms (0.05 = five percentage points); cost and tokens in relative
    terms (0.25 = 25% more), None also when the previous figure was 0.
    """

    completion: RateChange | None
    failure: RateChange | None
    high_severity: RateChange | None
    cost_per_completed: float | None
    tokens_median: float | None
    tokens_p95: float | None


def _rate_change(k1: int, n1: int, k2: int, n2: int) -> RateChange | None:
    interval = newcombe_diff(k1, n1, k2, n2)
    if interval is None:
        return None
    return RateChange(diff=k1 / n1 - k2 / n2, lo=interval.lo, hi=interval.hi)


def _relative(current: float | None, previous: float | None) -> float | None:
    if current is None or previous is None or previous == 0:
        return None
    return current / previous - 1


def change(current: WindowStats, previous: WindowStats) -> Change:
    """How the current window's figures moved from the previous window's."""
    c, p = current, previous
    return Change(
        completion=_rate_change(
            c.completion.completed, c.completion.n, p.completion.completed, p.completion.n
        ),
        failure=_rate_change(c.failure.failed, c.failure.n, p.failure.failed, p.failure.n),
        high_severity=_rate_change(
            c.high_severity.flagged, c.high_severity.n, p.high_severity.flagged, p.high_severity.n
        ),
        cost_per_completed=_relative(c.cost_per_completed.value, p.cost_per_completed.value),
        tokens_median=_relative(c.tokens.median, p.tokens.median),
        tokens_p95=_relative(c.tokens.p95, p.tokens.p95),
    )


# --- thresholds --------------------------------------------------------------------------------


class MonitorThresholds(BaseModel):
    """When a subject's window gives a finding. Rate limits use intervals, so that a handful of
    sessions cannot raise an alert on noise alone."""

    model_config = ConfigDict(extra="forbid")

    failure_rate: float = Field(default=0.20, ge=0, le=1)
    """Alert when the failure rate's 95% Wilson lower bound is above this."""
    failure_rate_rise: float = Field(default=0.05, ge=0, le=1)
    """Alert when the failure rate rose by more than this and the Newcombe interval of the rise
    lies above 0."""
    completion_rate_drop: float = Field(default=0.05, ge=0, le=1)
    """Alert when the completion rate fell by more than this and the Newcombe interval of the
    fall lies below 0."""
    high_severity_share: float = Field(default=0.05, ge=0, le=1)
    """Alert when the high/critical share's 95% Wilson lower bound is above this."""
    cost_per_completed_rise: float = Field(default=0.25, ge=0)
    """Alert when cost per completed session rose by more than this fraction (0.25 = 25%)."""
    cost_min_completed: int = Field(default=10, ge=1)
    """Compare cost per completed session only when both windows have at least this many
    completed sessions: the figure is a ratio without an interval, noisy on a few sessions."""


class Crossing(BaseModel):
    """One threshold a subject crossed: what was observed against which limit."""

    threshold: str
    """The `MonitorThresholds` field."""
    observed: float
    limit: float
    summary: str


def crossings(
    current: WindowStats, previous: WindowStats, moved: Change, thresholds: MonitorThresholds
) -> list[Crossing]:
    """Every threshold the current window crosses, in `MonitorThresholds` order."""
    t = thresholds
    found: list[Crossing] = []
    failure, severity = current.failure, current.high_severity
    if failure.lo is not None and failure.lo > t.failure_rate:
        found.append(
            Crossing(
                threshold="failure_rate",
                observed=failure.lo,
                limit=t.failure_rate,
                summary=f"failure rate {rate_text(failure.failed, failure.n)} is credibly "
                f"above {t.failure_rate:.2f}",
            )
        )
    rise = moved.failure
    if rise is not None and rise.diff > t.failure_rate_rise and rise.lo > 0:
        found.append(
            Crossing(
                threshold="failure_rate_rise",
                observed=rise.diff,
                limit=t.failure_rate_rise,
                summary=f"failure rate up {diff_text(rise)} to {failure.failed}/{failure.n}",
            )
        )
    fall = moved.completion
    if fall is not None and -fall.diff > t.completion_rate_drop and fall.hi < 0:
        completion = current.completion
        found.append(
            Crossing(
                threshold="completion_rate_drop",
                observed=-fall.diff,
                limit=t.completion_rate_drop,
                summary=f"completion rate down {diff_text(fall)} to "
                f"{completion.completed}/{completion.n}",
            )
        )
    if severity.lo is not None and severity.lo > t.high_severity_share:
        found.append(
            Crossing(
                threshold="high_severity_share",
                observed=severity.lo,
                limit=t.high_severity_share,
                summary=f"high/critical findings in {rate_text(severity.flagged, severity.n)} "
                f"of sessions, credibly above {t.high_severity_share:.2f}",
            )
        )
    cost = moved.cost_per_completed
    enough = min(current.cost_per_completed.completed, previous.cost_per_completed.completed)
    if cost is not None and cost > t.cost_per_completed_rise and enough >= t.cost_min_completed:
        found.append(
            Crossing(
                threshold="cost_per_completed_rise",
                observed=cost,
                limit=t.cost_per_completed_rise,
                summary=f"cost per completed session up {cost:+.0%} to "
                f"${current.cost_per_completed.value:.4f}",
            )
        )
    return found


# --- the report --------------------------------------------------------------------------------


class SubjectHealth(WindowStats):
    """One subject's current window, the previous one, the change and the thresholds crossed.

    `status` is `no_data` when the subject sent no signals in the window, `insufficient` when
    none of its sessions is known to have ended (only running or waiting sessions, or sessions
    without a state), so no figure can be measured — neither is ever healthy — `alert` when a
    threshold was crossed, `ok` otherwise.
    """

    subject: str
    status: Status
    expected: bool
    """Named in `expect`: its silence gives a `monitor_no_data` finding."""
    previous: WindowStats
    change: Change
    findings: list[Crossing]


class MonitorReport(BaseModel):
    """A monitor run's report: per-subject health over a window, with counts — never text."""

    report_id: str
    signals: str
    """The signals reference that was read."""
    window: str
    """The window as given, e.g. `24h`."""
    current: Window
    previous: Window
    thresholds: MonitorThresholds
    records: SignalCounts
    subjects: list[SubjectHealth]
    note: str = ABSENCE_NOTE


def assess(
    signals: Iterable[SessionSignal],
    counts: SignalCounts,
    *,
    source: str,
    window: str,
    now: datetime,
    report_id: str,
    thresholds: MonitorThresholds | None = None,
    expect: Iterable[str] = (),
) -> MonitorReport:
    """Health per subject over [now − window, now), compared with the window before it.

    Args:
        signals: The sessions (`read_signals`).
        counts: Their line counts (`read_signals`); the window counts are filled in here.
        source: The signals reference, recorded in the report.
        window: Window length, `30m`, `6h`, `24h`, `7d`.
        now: End of the current window (exclusive).
        report_id: The report's id; findings are recorded under it.
        thresholds: When to raise findings (defaults: `MonitorThresholds()`).
        expect: Subjects that should be reporting: any without signals is listed as no data.
    """
    current, previous = windows(window, now)
    limits = thresholds or MonitorThresholds()
    counts = counts.model_copy()
    expected = expected_subjects(expect)
    subjects = set(expected)
    in_current: dict[str, list[SessionSignal]] = {}
    in_previous: dict[str, list[SessionSignal]] = {}
    for signal in signals:
        if signal.subject is None:
            counts.unattributed += 1
            continue
        subjects.add(signal.subject)
        moment = signal.at
        if moment is None:
            counts.undated += 1
        elif current.holds(moment):
            counts.current += 1
            in_current.setdefault(signal.subject, []).append(signal)
        elif previous.holds(moment):
            counts.previous += 1
            in_previous.setdefault(signal.subject, []).append(signal)
        else:
            counts.outside += 1
    health = []
    for subject in sorted(subjects):
        now_stats = window_stats(in_current.get(subject, []))
        before = window_stats(in_previous.get(subject, []))
        moved = change(now_stats, before)
        crossed = crossings(now_stats, before, moved, limits) if now_stats.measurable else []
        health.append(
            SubjectHealth(
                **dict(now_stats),
                subject=subject,
                status=_status(now_stats, crossed),
                expected=subject in expected,
                previous=before,
                change=moved,
                findings=crossed,
            )
        )
    return MonitorReport(
        report_id=report_id,
        signals=source,
        window=window,
        current=current,
        previous=previous,
        thresholds=limits,
        records=counts,
        subjects=health,
    )


def _status(stats: WindowStats, crossed: list[Crossing]) -> Status:
    if not stats.sessions:
        return "no_data"
    if not stats.measurable:
        return "insufficient"
    return "alert" if crossed else "ok"


def expected_subjects(expect: Iterable[str]) -> set[str]:
    """The subjects named to be reporting; raises InputError (never echoing one) if malformed."""
    found = set()
    for position, subject in enumerate(expect, start=1):
        try:
            found.add(checked_subject(subject))
        except ValueError as exc:
            raise InputError("--expect", f"subject {position} {exc}") from None
    return found


def silent(health: SubjectHealth) -> bool:
    """Whether a subject that should be measurable has nothing measurable in the window: it is
    expected, or it had measurable sessions in the previous window."""
    return health.status in ("no_data", "insufficient") and (
        health.expected or health.previous.measurable
    )


def monitor_findings(report: MonitorReport) -> list[Finding]:
    """One `monitor_threshold` finding per alerting subject, listing every threshold crossed,
    and one `monitor_no_data` finding per silent subject (`silent`)."""
    return [*_threshold_findings(report), *_no_data_findings(report)]


def _span(report: MonitorReport) -> str:
    return (
        f"(sessions {report.current.start:%Y-%m-%d %H:%M} to "
        f"{report.current.end:%Y-%m-%d %H:%M} UTC)"
    )


def _no_data_findings(report: MonitorReport) -> list[Finding]:
    return [
        Finding(
            kind=NO_DATA_KIND,
            run_id=report.report_id,
            subject=health.subject,
            occurred_at=report.current.end,
            summary=f"{health.subject}: "
            + (
                "no signals in the window"
                if health.status == "no_data"
                else f"{health.sessions} session(s), none known to have ended "
                f"({states_text(health)})"
            )
            + f", {'expected' if health.expected else 'reporting in the previous window'} "
            + _span(report),
            details={
                "window": report.window,
                "current": report.current.model_dump(mode="json"),
                "status": health.status,
                "expected": health.expected,
                "sessions": health.sessions,
                "states": health.states,
                "previous_sessions": health.previous.sessions,
            },
        )
        for health in report.subjects
        if silent(health)
    ]


def _threshold_findings(report: MonitorReport) -> list[Finding]:
    return [
        Finding(
            kind=FINDING_KIND,
            run_id=report.report_id,
            subject=health.subject,
            occurred_at=report.current.end,
            summary=f"{health.subject}: "
            + "; ".join(c.summary for c in health.findings)
            + f" {_span(report)}",
            details={
                "window": report.window,
                "current": report.current.model_dump(mode="json"),
                "sessions": health.sessions,
                "crossings": [c.model_dump(mode="json") for c in health.findings],
            },
        )
        for health in report.subjects
        if health.status == "alert"
    ]


def report_key(report_id: str) -> str:
    """Where a monitor report is kept: `monitor/<report_id>.json`."""
    return f"{REPORT_PREFIX}{report_id}.json"


def save_report(store: EvidenceStore, report: MonitorReport) -> MonitorReport:
    """Write the report once; when one is already there (a retry), return that first one."""
    if store.put_once_if_absent(report_key(report.report_id), report.model_dump_json().encode()):
        return report
    return load_report(store, report.report_id)


def load_report(store: EvidenceStore, report_id: str) -> MonitorReport:
    """A recorded monitor report (raises `NotFoundError` when there is none)."""
    return MonitorReport.model_validate_json(store.get(report_key(report_id)))


# --- presentation ------------------------------------------------------------------------------


def diff_text(moved: RateChange | None) -> str:
    """`+0.267 (95% CI +0.100 to +0.424)`, or `n/a` without both windows."""
    if moved is None:
        return "n/a"
    return f"{moved.diff:+.3f} (95% CI {moved.lo:+.3f} to {moved.hi:+.3f})"


def relative_text(value: float | None) -> str:
    """`+152%`, or `n/a`."""
    return "n/a" if value is None else f"{value:+.0%}"


def cost_text(cost: CostPerCompleted) -> str:
    """`$0.0123 ($0.37 / 30 completed)`; `≥` when some ended sessions reported no cost; the
    spend of sessions that have not ended, which is in neither figure, after a `+`."""
    spent = f"(${cost.total_usd:.2f} / {cost.completed} completed)"
    live = f"; + ${cost.not_ended_usd:.2f} in {cost.not_ended} not ended" if cost.not_ended else ""
    if cost.value is None:
        return f"n/a {spent}{live}"
    return f"{'≥ ' if cost.uncosted else ''}${cost.value:.4f} {spent}{live}"


def states_text(stats: WindowStats) -> str:
    """`26 completed, 13 failed, 2 abandoned, 1 running, 0 waiting` (and `, 1 unknown`)."""
    parts = [f"{count} {state}" for state, count in stats.states.items()]
    if stats.unknown_state:
        parts.append(f"{stats.unknown_state} unknown")
    return ", ".join(parts)


def tokens_text(tokens: Tokens) -> str:
    """`median / p95 (n=…)`, or `n/a (n=0)`."""
    if tokens.median is None or tokens.p95 is None:
        return "n/a (n=0)"
    return f"{tokens.median:.0f} / {tokens.p95:.0f} (n={tokens.n})"


def change_text(moved: Change) -> str:
    """The change against the previous window, in one short line."""
    return (
        f"failure {diff_text(moved.failure)}, completion {diff_text(moved.completion)}, "
        f"cost {relative_text(moved.cost_per_completed)}"
    )


def markdown_report(report: MonitorReport) -> str:
    """The report as a markdown artifact: one row per subject, counts beside every rate."""
    lines = [
        f"# Session monitor · {report.window} to {report.current.end:%Y-%m-%d %H:%M} UTC",
        "",
        f"**{ABSENCE_NOTE}**",
        "",
        "| subject | status | sessions | states | unknown | completion | failure | high/critical "
        "| cost / completed | tokens median / p95 | change (failure, completion, cost) |",
        "|---|---|---:|---|---:|---|---|---|---|---|---|",
    ]
    for h in report.subjects:
        lines.append(
            f"| {h.subject} | {h.status.replace('_', ' ')} | {h.sessions} | {states_text(h)} "
            f"| {h.unknown.sessions} "
            f"| {rate_text(h.completion.completed, h.completion.n)} "
            f"| {rate_text(h.failure.failed, h.failure.n)} "
            f"| {rate_text(h.high_severity.flagged, h.high_severity.n)} "
            f"| {cost_text(h.cost_per_completed)} | {tokens_text(h.tokens)} "
            f"| {change_text(h.change)} |"
        )
    r = report.records
    lines += [
        "",
        f"{r.lines} signal line(s), {r.sessions} session(s) ({r.superseded} superseded by a "
        f"later line): {r.current} in the window, {r.previous} in the previous window, "
        f"{r.outside} outside both, {r.undated} undated, {r.unattributed} without a subject.",
    ]
    alerts = [c for h in report.subjects for c in h.findings]
    if alerts:
        lines += ["", "**Thresholds crossed**"]
        lines += [f"- {h.subject}: {c.summary}" for h in report.subjects for c in h.findings]
    quiet = [h.subject for h in report.subjects if silent(h)]
    if quiet:
        lines += ["", f"**Nothing measurable from** {', '.join(quiet)} (`{NO_DATA_KIND}`)"]
    lines += ["", f"Report `{report.report_id}` · signals `{report.signals}`"]
    return "\n".join(lines)
