"""Release gates in a fixed order: evidence coverage and external effects before any average.

Order (seed 002, SPEC §12): `coverage` → `false_success` → `unknown_effects` → `floors` →
`quality_cost`. Every gate is evaluated and reported; the verdict names the first one that
stops the release, because that is the one to investigate first. Not a weighted composite: no
amount of fluency may buy back one unverified completion.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict

from assay.release.contract import ReleaseContract
from assay.release.signals import Coverage, Signals

GateName = Literal["coverage", "false_success", "unknown_effects", "floors", "quality_cost"]
GATE_ORDER: tuple[GateName, ...] = get_args(GateName)


class GateCheck(BaseModel):
    """One check of a gate, in words: numerator/denominator and the threshold."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    detail: str


class GateResult(BaseModel):
    """One gate's verdict and its checks (failing checks first)."""

    model_config = ConfigDict(frozen=True)

    gate: GateName
    passed: bool
    checks: list[GateCheck]


class GateVerdict(BaseModel):
    """Every gate's result in order, and the first gate that stopped the release (if any)."""

    model_config = ConfigDict(frozen=True)

    passed: bool
    stopped_at: GateName | None
    results: list[GateResult]


Check = tuple[bool, str]
"""(passed, detail) while a gate is being evaluated."""


def _at_most(name: str, count: int, of: int, maximum: int) -> Check:
    verb = "within" if count <= maximum else "exceeds"
    return count <= maximum, f"{name} {count}/{of} {verb} the maximum {maximum}"


def _floor(name: str, numerator: int, denominator: int, floor: float | None, note: str) -> Check:
    if floor is None:
        return True, f"{name} {numerator}/{denominator} not gated (no floor){note}"
    if denominator == 0:
        return False, f"{name} unavailable (0/0): no data never meets the floor {floor:.2f}"
    rate = numerator / denominator
    verb = "meets" if rate >= floor else "is below"
    return (
        rate >= floor,
        f"{name} {numerator}/{denominator} = {rate:.3f} {verb} the floor {floor:.2f}{note}",
    )


def _coverage(s: Signals, gaps: Coverage, c: ReleaseContract) -> list[Check]:
    claimed = s.false_success.claimed
    calls = s.tool_effects.attempts + s.tool_effects.declined + gaps.verdict_missing
    return [
        (
            gaps.outcome_missing == 0,
            f"{claimed - gaps.outcome_missing}/{claimed} claimed completions have an outcome "
            f"verdict or an explicit `unavailable`; {gaps.outcome_missing} have none",
        ),
        (
            gaps.verdict_missing == 0,
            f"{calls - gaps.verdict_missing}/{calls} tool calls have a destination verdict; "
            f"{gaps.verdict_missing} have none",
        ),
    ]


def _false_success(s: Signals, gaps: Coverage, c: ReleaseContract) -> list[Check]:
    claimed = s.false_success.claimed
    if claimed == 0:
        # Both rates are 0/0: like a floor, an unavailable rate is never within a maximum.
        return [
            (
                False,
                "no claimed completions: nothing was verified "
                "(false successes and unverified completions 0/0)",
            )
        ]
    return [
        _at_most("false successes", s.false_success.count, claimed, c.false_success_max),
        _at_most(
            "unverified completions",
            s.unverified_completions,
            claimed,
            c.unverified_completions_max,
        ),
    ]


def _unknown_effects(s: Signals, gaps: Coverage, c: ReleaseContract) -> list[Check]:
    effects = s.tool_effects
    maximum = c.unknown_effects_max
    return [_at_most("unknown tool effects", effects.unknown, effects.attempts, maximum)]


def _floors(s: Signals, gaps: Coverage, c: ReleaseContract) -> list[Check]:
    effects = s.tool_effects
    waits = "".join(
        [
            f" ({gaps.live_waits} explicit wait(s) stopped the clock: "
            f"{gaps.waited_windows} waiting window(s) not active)"
            if gaps.live_waits
            else "",
            f" ({gaps.expired_waits} expired wait(s): their windows count as active)"
            if gaps.expired_waits
            else "",
        ]
    )
    declined = f" ({effects.declined} declined call(s) shown apart)" if effects.declined else ""
    return [
        _floor("progress", s.progress.with_delta, s.progress.active, c.progress_floor, waits),
        _floor(
            "tool-effect integrity",
            effects.verified,
            effects.attempts,
            c.tool_effect_floor,
            declined,
        ),
    ]


def _quality_cost(s: Signals, gaps: Coverage, c: ReleaseContract) -> list[Check]:
    quality, cost = s.quality, s.cost
    checks: list[Check] = []
    if c.quality_min is None:
        checks.append((True, "quality not gated (no minimum)"))
    elif quality.mean is None:
        checks.append((False, f"quality unavailable: 0 graded trials (minimum {c.quality_min})"))
    else:
        verb = "meets" if quality.mean >= c.quality_min else "is below"
        checks.append(
            (
                quality.mean >= c.quality_min,
                f"quality {quality.mean:.3f} ({quality.graded} graded) {verb} the minimum "
                f"{c.quality_min:.3f}",
            )
        )
    if c.cost_per_verified_max is None:
        checks.append((True, "cost per verified result not gated (no maximum)"))
    elif cost.per_verified is None:
        verified = (
            s.false_success.claimed
            - s.false_success.count
            - s.unverified_completions
            - gaps.outcome_missing
        )
        checks.append(
            (
                False,
                f"cost per verified result unavailable ({cost.missing} trial(s) without cost, "
                f"{verified} verified outcome(s))",
            )
        )
    else:
        within = cost.per_verified <= c.cost_per_verified_max
        checks.append(
            (
                within,
                f"cost per verified result ${cost.per_verified:.2f} "
                f"{'within' if within else 'exceeds'} the maximum ${c.cost_per_verified_max:.2f}",
            )
        )
    return checks


GATES: dict[GateName, Callable[[Signals, Coverage, ReleaseContract], list[Check]]] = {
    "coverage": _coverage,
    "false_success": _false_success,
    "unknown_effects": _unknown_effects,
    "floors": _floors,
    "quality_cost": _quality_cost,
}


def evaluate(signals: Signals, coverage: Coverage, contract: ReleaseContract) -> GateVerdict:
    """Run every gate in order; the first failing one is where the release stopped."""
    results = []
    for gate in GATE_ORDER:
        checks = sorted(GATES[gate](signals, coverage, contract), key=lambda check: check[0])
        results.append(
            GateResult(
                gate=gate,
                passed=all(ok for ok, _ in checks),
                checks=[GateCheck(passed=ok, detail=detail) for ok, detail in checks],
            )
        )
    stopped = next((r.gate for r in results if not r.passed), None)
    return GateVerdict(passed=stopped is None, stopped_at=stopped, results=results)
