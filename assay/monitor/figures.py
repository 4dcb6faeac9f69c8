"""Per-window figures over the sessions that ended, and their change against the previous window.

Completion and failure rates over the sessions that ended (completed, failed, abandoned;
`running` and `waiting` are counted apart and shown), and over the same ended sessions the share
whose most severe finding is high or critical, cost per completed session and tokens per session
(median and p95), since a live session's figures are still moving. Rates come with 95% Wilson
intervals, changes against the previous window with Newcombe intervals.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Final

from pydantic import (
    BaseModel,
)

from assay.monitor.signals import ENDED, SessionSignal, Severity
from assay.rate import Rate
from assay.stats import newcombe_diff

HIGH: Final[tuple[Severity, ...]] = ("high", "critical")


class CountedRate(Rate):
    """A rate over `n` sessions."""

    n: int
    """The denominator."""


class Completion(CountedRate):
    """Completed sessions over sessions that ended (completed, failed or abandoned)."""

    completed: int


class Failure(CountedRate):
    """Failed sessions over sessions that ended."""

    failed: int


class HighSeverity(CountedRate):
    """Ended sessions whose most severe finding was high or critical, over ended sessions with a
    known `max_severity`. A live session's severity is provisional (it can still rise), so it is
    in no denominator; live sessions already at high or critical are counted apart."""

    flagged: int
    not_ended_flagged: int


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
        completion=Completion.of(completed, ended, n=ended, completed=completed),
        failure=Failure.of(states["failed"], ended, n=ended, failed=states["failed"]),
        high_severity=HighSeverity.of(
            flagged,
            len(severities),
            n=len(severities),
            flagged=flagged,
            not_ended_flagged=sum(1 for s in unfinished if s.max_severity in HIGH),
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


def diff_text(moved: RateChange | None) -> str:
    """`+0.267 (95% CI +0.100 to +0.424)`, or `n/a` without both windows."""
    if moved is None:
        return "n/a"
    return f"{moved.diff:+.3f} (95% CI {moved.lo:+.3f} to {moved.hi:+.3f})"


def states_text(stats: WindowStats) -> str:
    """`26 completed, 13 failed, 2 abandoned, 1 running, 0 waiting` (and `, 1 unknown`)."""
    parts = [f"{count} {state}" for state, count in stats.states.items()]
    if stats.unknown_state:
        parts.append(f"{stats.unknown_state} unknown")
    return ", ".join(parts)
