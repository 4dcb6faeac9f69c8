"""The five release signals of one variant, kept separate and each with its own denominator.

Each denominator prevents a different lie (seed 002): mean quality without coverage rewards the
easy trials, a successful call is not a successful effect, cost per run rewards cheap failures,
and a completion rate rewards the agent for grading its own claim. So nothing here is ever
folded into one score.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from assay.release.trials import Trial

DECIMALS = 6
"""Means and costs are rounded once, here, so stored reports do not carry float noise."""


class _Signal(BaseModel):
    model_config = ConfigDict(frozen=True)


class QualitySignal(_Signal):
    """Mean score over graded trials, beside how many were graded and how many claimed done."""

    mean: float | None
    """None when no trial was graded (no data, not a zero)."""
    graded: int
    completed: int
    """Trials that claimed a completion."""


class ProgressSignal(_Signal):
    """Active observation windows with a task-specific evidence delta / active windows.

    A live explicit wait stops the clock: its trial's windows without delta are waiting, not
    active (see `active_windows`).
    """

    with_delta: int
    active: int


class ToolEffectsSignal(_Signal):
    """Tool calls by destination verdict; declined calls are shown, never counted as failed."""

    verified: int
    failed: int
    unknown: int
    declined: int

    @property
    def attempts(self) -> int:
        """The integrity denominator: verified + failed + unknown effect attempts."""
        return self.verified + self.failed + self.unknown


class CostSignal(_Signal):
    """Cost in USD per run and per verified result, with estimated and missing costs flagged.

    `total` covers the trials that have a cost (None when none has). When any cost is missing,
    `per_run` and `per_verified` are None: a partial total divided by every run would understate.
    `per_verified` is also None when no outcome was verified.
    """

    total: float | None
    per_run: float | None
    per_verified: float | None
    estimated: int
    missing: int


class FalseSuccessSignal(_Signal):
    """Claimed completions whose outcome verdict failed / all claimed completions."""

    count: int
    claimed: int


class Signals(_Signal):
    """The five signals of one variant (plus unverified completions), as reported."""

    variant: str
    trials: int
    quality: QualitySignal
    progress: ProgressSignal
    tool_effects: ToolEffectsSignal
    cost: CostSignal
    false_success: FalseSuccessSignal
    unverified_completions: int
    """Claimed completions whose outcome is `unavailable`: no verdict was possible."""


class Coverage(NamedTuple):
    """What the signals cannot show: missing evidence (gated) and explicit waits (excused)."""

    outcome_missing: int
    """Claimed completions with a null outcome (no verdict and no explicit `unavailable`)."""
    verdict_missing: int
    """Tool calls with no destination verdict."""
    live_waits: int
    """Trials paused in an explicit wait that had not expired at evaluation time."""
    waited_windows: int
    """Windows without delta of those trials: spent waiting, so left out of `active`."""
    expired_waits: int
    """Trials whose wait expired before evaluation time: stale, so their windows count."""


def _ratio(numerator: float, denominator: int) -> float | None:
    return None if denominator == 0 else round(numerator / denominator, DECIMALS)


def _is_live(trial: Trial, now: datetime) -> bool:
    wait = trial.progress.wait
    return wait is not None and wait.expires_at > now


def active_windows(trial: Trial, now: datetime) -> int:
    """The trial's active windows: all of them, unless a live explicit wait stopped the clock.

    The one place where a wait changes a figure. While a wait with owner, decision, expiry and
    resume state is live at `now`, the trial's windows without evidence delta are spent waiting
    for that decision, not stuck, so only its windows with delta are active. A wait that expired
    before `now` without a decision is stale: its windows without delta count as stuck, as if
    there were no wait.
    """
    progress = trial.progress
    return progress.windows_with_delta if _is_live(trial, now) else progress.active_windows


def measure(variant: str, trials: Sequence[Trial], now: datetime) -> tuple[Signals, Coverage]:
    """Count one variant's trials into its signals and its coverage gaps.

    Args:
        variant: The variant's name.
        trials: Its trials.
        now: Evaluation time (timezone-aware), against which wait expiries are judged.
    """
    graded = [t.quality.score for t in trials if t.quality.score is not None]
    claimed = [t for t in trials if t.claimed_completion]
    outcomes = Counter(t.outcome for t in claimed)
    verdicts = Counter(effect.verdict for t in trials for effect in t.tool_effects)
    costs = [t.cost_usd for t in trials if t.cost_usd is not None]
    missing_costs = sum(t.cost_status == "missing" for t in trials)
    total = math.fsum(costs) if costs else None
    covered = None if missing_costs else total
    live = [t for t in trials if _is_live(t, now)]
    signals = Signals(
        variant=variant,
        trials=len(trials),
        quality=QualitySignal(
            mean=_ratio(math.fsum(graded), len(graded)),
            graded=len(graded),
            completed=len(claimed),
        ),
        progress=ProgressSignal(
            with_delta=sum(t.progress.windows_with_delta for t in trials),
            active=sum(active_windows(t, now) for t in trials),
        ),
        tool_effects=ToolEffectsSignal(
            verified=verdicts["verified"],
            failed=verdicts["failed"],
            unknown=verdicts["unknown"],
            declined=verdicts["declined"],
        ),
        cost=CostSignal(
            total=None if total is None else round(total, DECIMALS),
            per_run=None if covered is None else _ratio(covered, len(trials)),
            per_verified=None if covered is None else _ratio(covered, outcomes["verified"]),
            estimated=sum(t.cost_status == "estimated" for t in trials),
            missing=missing_costs,
        ),
        false_success=FalseSuccessSignal(count=outcomes["failed"], claimed=len(claimed)),
        unverified_completions=outcomes["unavailable"],
    )
    coverage = Coverage(
        outcome_missing=outcomes[None],
        verdict_missing=verdicts[None],
        live_waits=len(live),
        waited_windows=sum(t.progress.active_windows - active_windows(t, now) for t in live),
        expired_waits=sum(t.progress.wait is not None for t in trials) - len(live),
    )
    return signals, coverage
