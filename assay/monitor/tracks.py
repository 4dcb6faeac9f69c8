"""Each subject's confidence sequences under a monitoring plan, shown window by window.

Every session that ended in [plan.since, now) is one observation per rate (completion, failure,
high/critical), in the order sessions ended. The sequence holds at every observation at once, so
its bounds can be read at every window end: the rows are the ends now, now − window, now − 2 ×
window, … back to the start (the latest `MAX_ROWS`). With a baseline, each other subject's i-th
session is paired with the baseline's i-th on the plan's signal, and the paired sequence of the
difference gives the state against the pre-registered margin (`sequences.states`).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Final

from pydantic import AwareDatetime, BaseModel

from assay.monitor.figures import HIGH
from assay.monitor.plan import HIGHER_IS_BETTER, SIGNALS, RegisteredPlan, Signal
from assay.monitor.sequences import STATES, MonitorState
from assay.monitor.signals import ENDED, SessionSignal
from assay.monitor.thresholds import Crossing, MonitorThresholds

MAX_ROWS: Final = 48
"""Window ends shown per sequence (the latest); the state uses every observation."""


class Bounds(BaseModel):
    """A rate's sequence read at the end of one window."""

    end: AwareDatetime
    n: int
    """Observations (ended sessions) since the start."""
    mean: float | None
    lo: float | None
    hi: float | None


class RateSequence(BaseModel):
    """One rate's confidence sequence for one subject."""

    signal: Signal
    rows: list[Bounds]


class PairedBounds(BaseModel):
    """The paired difference (subject − baseline) read at the end of one window."""

    end: AwareDatetime
    pairs: int
    diff: float | None
    lo: float | None
    hi: float | None
    state: MonitorState


class PairedSequence(BaseModel):
    """The subject against the plan's baseline on the plan's signal, and the state it gives."""

    baseline: str
    signal: Signal
    margin: float
    state: MonitorState
    declared_at: AwareDatetime | None
    """When the latest state was first reached (None while inconclusive): it has held since."""
    rows: list[PairedBounds]


class SubjectSequences(BaseModel):
    subject: str
    rates: list[RateSequence]
    paired: PairedSequence | None
    """None for the baseline itself and without a baseline."""


class SequenceReport(BaseModel):
    """The plan as registered, the window ends the rows are read at, and every subject."""

    registered: RegisteredPlan
    rows_omitted: int
    """Earlier window ends not shown (the state still counts their observations)."""
    subjects: list[SubjectSequences]


def window_ends(since: datetime, now: datetime, length: timedelta) -> tuple[list[datetime], int]:
    """now, now − length, … while after `since`, ascending: the latest `MAX_ROWS`, and how many
    earlier ones were left out."""
    count = max(1, -(-(now - since) // length)) if now > since else 1
    shown = min(count, MAX_ROWS)
    return [now - k * length for k in reversed(range(shown))], count - shown


def _observations(
    sessions: Iterable[SessionSignal], signal: Signal
) -> list[tuple[datetime, float]]:
    found = []
    for s in sessions:
        if s.state not in ENDED or s.at is None:
            continue
        if signal == "completion":
            found.append((s.at, float(s.state == "completed")))
        elif signal == "failure":
            found.append((s.at, float(s.state == "failed")))
        elif s.max_severity is not None:
            found.append((s.at, float(s.max_severity in HIGH)))
    return sorted(found, key=lambda pair: pair[0])


def _counts_at(times: list[datetime], ends: list[datetime]) -> list[int]:
    """How many of the (sorted) times fall before each end."""
    from bisect import bisect_left

    return [bisect_left(times, end) for end in ends]


def _rate_sequence(
    observed: list[tuple[datetime, float]], signal: Signal, ends: list[datetime], alpha: float
) -> RateSequence:
    import numpy as np

    from assay.monitor.sequences import betting_cs

    values = np.array([v for _, v in observed])
    lo, hi = betting_cs(values, alpha) if values.size else (values, values)
    means = np.cumsum(values) / np.arange(1, values.size + 1) if values.size else values
    rows = [
        Bounds(
            end=end,
            n=n,
            mean=float(means[n - 1]) if n else None,
            lo=float(lo[n - 1]) if n else None,
            hi=float(hi[n - 1]) if n else None,
        )
        for end, n in zip(ends, _counts_at([t for t, _ in observed], ends), strict=True)
    ]
    return RateSequence(signal=signal, rows=rows)


def _paired_sequence(
    observed: list[tuple[datetime, float]],
    baseline_observed: list[tuple[datetime, float]],
    registered: RegisteredPlan,
    ends: list[datetime],
) -> PairedSequence:
    import numpy as np

    from assay.monitor.sequences import paired_difference_cs, states

    plan = registered.plan
    assert plan.baseline is not None
    n = min(len(observed), len(baseline_observed))
    mine = np.array([v for _, v in observed[:n]])
    theirs = np.array([v for _, v in baseline_observed[:n]])
    paired_at = [max(a[0], b[0]) for a, b in zip(observed, baseline_observed, strict=False)]
    if n:
        lo, hi = paired_difference_cs(mine, theirs, plan.alpha)
        codes = states(lo, hi, plan.margin, HIGHER_IS_BETTER[plan.signal])
        diffs = np.cumsum(mine - theirs) / np.arange(1, n + 1)
    rows = []
    for end, pairs in zip(ends, _counts_at(paired_at, ends), strict=True):
        rows.append(
            PairedBounds(
                end=end,
                pairs=pairs,
                diff=float(diffs[pairs - 1]) if pairs else None,
                lo=float(lo[pairs - 1]) if pairs else None,
                hi=float(hi[pairs - 1]) if pairs else None,
                state=STATES[codes[pairs - 1]] if pairs else "inconclusive",
            )
        )
    state: MonitorState = STATES[codes[-1]] if n else "inconclusive"
    declared_at = None
    if state != "inconclusive":
        declared_at = paired_at[int(np.argmax(codes == codes[-1]))]
    return PairedSequence(
        baseline=plan.baseline,
        signal=plan.signal,
        margin=plan.margin,
        state=state,
        declared_at=declared_at,
        rows=rows,
    )


def sequence_report(
    registered: RegisteredPlan,
    by_subject: dict[str, list[SessionSignal]],
    *,
    now: datetime,
    length: timedelta,
) -> SequenceReport:
    """Every subject's rate sequences and, with a baseline, its paired sequence and state.

    Args:
        registered: The plan, as recorded in the store.
        by_subject: Each subject's sessions (any times: only those ended in [since, now) count).
        now: The end of the latest window.
        length: The window length: rows are read every `length` back from `now`.
    """
    plan = registered.plan
    ends, omitted = window_ends(plan.since, now, length)
    kept = {
        subject: [s for s in sessions if s.at is not None and plan.since <= s.at < now]
        for subject, sessions in by_subject.items()
    }
    baseline = _observations(kept.get(plan.baseline, []), plan.signal) if plan.baseline else []
    subjects = []
    for subject in sorted(kept):
        observed = {signal: _observations(kept[subject], signal) for signal in SIGNALS}
        paired = None
        if plan.baseline is not None and subject != plan.baseline:
            paired = _paired_sequence(observed[plan.signal], baseline, registered, ends)
        subjects.append(
            SubjectSequences(
                subject=subject,
                rates=[_rate_sequence(observed[s], s, ends, plan.alpha) for s in SIGNALS],
                paired=paired,
            )
        )
    return SequenceReport(registered=registered, rows_omitted=omitted, subjects=subjects)


def sequence_crossings(
    sequences: SubjectSequences, thresholds: MonitorThresholds
) -> list[Crossing]:
    """The limits a subject's sequences cross now, replacing the fixed-n interval rules: a rate
    whose sequence lies wholly above its limit, and a paired sequence that declares `degraded`."""
    latest = {rate.signal: rate.rows[-1] for rate in sequences.rates}
    found = []
    limits: tuple[tuple[Signal, float], ...] = (
        ("failure", thresholds.failure_rate),
        ("high_severity", thresholds.high_severity_share),
    )
    for signal, limit in limits:
        row = latest[signal]
        if row.lo is not None and row.lo > limit:
            found.append(
                Crossing(
                    threshold=f"{signal}_rate" if signal == "failure" else f"{signal}_share",
                    observed=row.lo,
                    limit=limit,
                    summary=f"{signal.replace('_', '/')} rate's confidence sequence "
                    f"({row.lo:.3f} to {row.hi:.3f} over {row.n}) credibly above {limit:.2f}",
                )
            )
    paired = sequences.paired
    if paired is not None and paired.state == "degraded":
        now = paired.rows[-1]
        found.append(
            Crossing(
                threshold="sequence_margin",
                observed=now.diff or 0.0,
                limit=-paired.margin if HIGHER_IS_BETTER[paired.signal] else paired.margin,
                summary=f"degraded against {paired.baseline} on {paired.signal}: "
                f"{paired_text(now)} beyond the pre-registered margin {paired.margin:.2f}",
            )
        )
    return found


def paired_text(row: PairedBounds) -> str:
    """`−0.120 (95% CS −0.210 to −0.060, 300 pairs)`, or `no pairs yet`."""
    if row.diff is None or row.lo is None or row.hi is None:
        return "no pairs yet"
    return f"{row.diff:+.3f} (CS {row.lo:+.3f} to {row.hi:+.3f}, {row.pairs} pairs)"
