"""The monitor report (SPEC §13): session health per subject, its findings, its evidence record.

A subject without signals in the window is `no_data`; one with sessions but none known to have
ended (only live sessions, or no states) is `insufficient`: absent signals prove nothing, so
neither is ever reported as healthy. An expected subject, or one measured in the previous window,
that has nothing measurable now gives a `monitor_no_data` Finding. When a session id appears more
than once for a subject, the last line wins: signal feeds report a session again as it moves from
`running` to `completed`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
)

from assay.errors import InputError
from assay.findings import Finding
from assay.monitor.figures import Change, WindowStats, change, states_text, window_stats
from assay.monitor.plan import RegisteredPlan
from assay.monitor.signals import SessionSignal, SignalCounts, checked_subject
from assay.monitor.thresholds import INTERVAL_THRESHOLDS, Crossing, MonitorThresholds, crossings
from assay.monitor.tracks import SequenceReport, sequence_crossings, sequence_report
from assay.monitor.windows import Window, parse_window, windows
from assay.store import EvidenceStore
from assay.store.write_once import Shelf

REPORT_PREFIX: Final = "monitor/"

FINDING_KIND: Final = "monitor_threshold"

NO_DATA_KIND: Final = "monitor_no_data"

ABSENCE_NOTE: Final = (
    "Absent signals prove nothing: a subject with no signals in the window is reported as "
    "no data, never as healthy, and these figures describe only the sessions that sent signals."
)

Status = Literal["ok", "no_data", "insufficient", "alert"]


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
    outside: int = 0
    """Its sessions in neither window (older than the previous one, or at or after `now`):
    a subject whose every session is there says so, not only `no_data`."""


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
    sequences: SequenceReport | None = None
    """Under a monitoring plan: each subject's confidence sequences, read at every window end
    since the plan's start, and its state against the baseline."""
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
    plan: RegisteredPlan | None = None,
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
        plan: The registered monitoring plan: confidence sequences from its start replace the
            fixed-n interval rules (`INTERVAL_THRESHOLDS`).
    """
    current, previous = windows(window, now)
    limits = thresholds or MonitorThresholds()
    counts = counts.model_copy()
    expected = expected_subjects(expect)
    subjects = set(expected)
    in_current: dict[str, list[SessionSignal]] = {}
    in_previous: dict[str, list[SessionSignal]] = {}
    outside: dict[str, int] = {}
    every: dict[str, list[SessionSignal]] = {}
    for signal in signals:
        if signal.subject is None:
            counts.unattributed += 1
            continue
        subjects.add(signal.subject)
        every.setdefault(signal.subject, []).append(signal)
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
            outside[signal.subject] = outside.get(signal.subject, 0) + 1
    sequences = None
    if plan is not None:
        every.update({subject: every.get(subject, []) for subject in expected})
        sequences = sequence_report(plan, every, now=current.end, length=parse_window(window))
    per_subject = {s.subject: s for s in sequences.subjects} if sequences else {}
    health = []
    for subject in sorted(subjects):
        now_stats = window_stats(in_current.get(subject, []))
        before = window_stats(in_previous.get(subject, []))
        moved = change(now_stats, before)
        crossed = crossings(now_stats, before, moved, limits) if now_stats.measurable else []
        if subject in per_subject and now_stats.measurable:
            crossed = [c for c in crossed if c.threshold not in INTERVAL_THRESHOLDS]
            crossed += sequence_crossings(per_subject[subject], limits)
        health.append(
            SubjectHealth(
                **dict(now_stats),
                subject=subject,
                status=_status(now_stats, crossed),
                expected=subject in expected,
                previous=before,
                change=moved,
                findings=crossed,
                outside=outside.get(subject, 0),
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
        sequences=sequences,
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


def _subject_finding(
    report: MonitorReport, health: SubjectHealth, kind: str, summary: str, details: dict[str, Any]
) -> Finding:
    """A finding about one subject of the report, dated at the end of its window."""
    return Finding(
        kind=kind,
        run_id=report.report_id,
        subject=health.subject,
        occurred_at=report.current.end,
        summary=f"{health.subject}: {summary}",
        details={"window": report.window, "current": report.current.model_dump(mode="json")}
        | details,
    )


def _no_data_findings(report: MonitorReport) -> list[Finding]:
    return [
        _subject_finding(
            report,
            health,
            NO_DATA_KIND,
            (
                "no signals in the window"
                if health.status == "no_data"
                else f"{health.sessions} session(s), none known to have ended "
                f"({states_text(health)})"
            )
            + f", {'expected' if health.expected else 'reporting in the previous window'} "
            + _span(report),
            {
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
        _subject_finding(
            report,
            health,
            FINDING_KIND,
            "; ".join(c.summary for c in health.findings) + f" {_span(report)}",
            {
                "sessions": health.sessions,
                "crossings": [c.model_dump(mode="json") for c in health.findings],
            },
        )
        for health in report.subjects
        if health.status == "alert"
    ]


_REPORTS = Shelf(REPORT_PREFIX, MonitorReport)
report_key = _REPORTS.key
"""Where a monitor report is kept: `monitor/<report_id>.json`."""
load_report = _REPORTS.get


def save_report(store: EvidenceStore, report: MonitorReport) -> MonitorReport:
    """Write the report once; when one is already there (a retry), return that first one."""
    return _REPORTS.put(store, report.report_id, report)
