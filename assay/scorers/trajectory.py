"""Trajectory scorers: the tools an agent called, with which arguments, in which order.

`trajectory`, `trajectory_precision` and `trajectory_recall` compare the agent's calls with the
case's `expected_trajectory` (see `assay.trajectory`); `tool_called`, `tool_not_called`,
`max_tool_calls` and `tool_errors` need no reference. docs/agents.md states every mode exactly.

Which calls match is `assay.scorers.call_matching` (arguments, hashing, maximum bipartite
matching); the words for each `match` mode's first mismatch, `assay.scorers.match_modes`.
Labels name tools and the first mismatch, never an argument value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, get_args

from pydantic import Field, field_validator

from assay.intake.record import Evidence
from assay.scorers._registry import (
    PASS,
    Observation,
    Outcome,
    Scorer,
    ScorerConfig,
    Status,
    clamp,
    fail,
    reference_scorer,
    scorer,
)
from assay.scorers.call_matching import (
    ArgsConfig,
    CallMatcher,
    ToolName,
    args_agree,
    known_mode,
    max_matching,
)
from assay.scorers.match_modes import MatchMode, tool_label, trajectory_mismatch
from assay.trajectory import Trajectory

TRAJECTORY_KINDS: Final = frozenset(
    {
        "trajectory",
        "trajectory_precision",
        "trajectory_recall",
        "tool_called",
        "tool_not_called",
        "max_tool_calls",
        "tool_errors",
    }
)
"""The check kinds that judge what the agent did: a case's trajectory verdict is theirs."""

NO_TRAJECTORY: Final = fail("no tool calls recorded (the output has no messages or tool spans)")
NAMES: Final = frozenset({Evidence.TOOL_NAMES})
WITH_ARGUMENTS: Final = frozenset({Evidence.TOOL_NAMES, Evidence.TOOL_ARGUMENTS})


class TrajectoryConfig(ArgsConfig):
    """`trajectory`: the agent's calls match the reference under `match`."""

    match: MatchMode = "exact"

    @field_validator("match", mode="before")
    @classmethod
    def _match_known(cls, value: Any) -> Any:
        return known_mode(value, get_args(MatchMode), "match mode")


class RateConfig(ArgsConfig):
    """`trajectory_precision` / `trajectory_recall`: the fraction passes at `>= min`."""

    min: float = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)


class ToolCalledConfig(ScorerConfig):
    """`tool_called`: calls to `tool` whose arguments include `args` number in [min, max]."""

    tool: ToolName
    min: int = Field(default=1, ge=0)
    max: int | None = Field(default=None, ge=0)
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("max")
    @classmethod
    def _max_not_below_min(cls, value: int | None, info: Any) -> int | None:
        low = info.data.get("min")
        if value is not None and low is not None and value < low:
            raise ValueError(f"max ({value}) is below min ({low})")
        return value


class ToolNotCalledConfig(ScorerConfig):
    """`tool_not_called`: none of these tools was called (a safety check)."""

    tool: list[ToolName] = Field(min_length=1)

    @field_validator("tool", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class MaxToolCallsConfig(ScorerConfig):
    """`max_tool_calls`: at most `max` calls in all."""

    max: int = Field(ge=0)


class ToolErrorsConfig(ScorerConfig):
    """`tool_errors`: at most `max` failed calls."""

    max: int = Field(default=0, ge=0)


def _needs(config: ArgsConfig) -> frozenset[Evidence]:
    """Names, and arguments unless every comparison ignores them."""
    ignored = config.args == "ignore" and all(
        mode == "ignore" for mode in config.args_by_tool.values()
    )
    return NAMES if ignored else WITH_ARGUMENTS


def _args_label(config: ArgsConfig) -> str:
    by_tool = f", per tool for {len(config.args_by_tool)}" if config.args_by_tool else ""
    return f"args {config.args}{by_tool}"


def _observed(check: Callable[[Trajectory], Outcome]) -> Callable[[Observation], Outcome]:
    def observe(observed: Observation) -> Outcome:
        if observed.trajectory is None:
            return NO_TRAJECTORY
        return check(observed.trajectory)

    return observe


@reference_scorer("trajectory", TrajectoryConfig, shorthand="match")
def trajectory(config: TrajectoryConfig, reference: Trajectory) -> Scorer:
    """Pass when the agent's calls match the reference under the configured mode."""
    matches = CallMatcher(config)

    def check(agent: Trajectory) -> Outcome:
        mismatch = trajectory_mismatch(config.match, agent, reference, matches)
        return PASS if mismatch is None else fail(clamp(mismatch))

    label = f"trajectory {config.match} ({_args_label(config)})"
    needs = _needs(config) | ({Evidence.PARALLEL} if config.match == "exact" else set())
    return Scorer("trajectory", label, observe=_observed(check), needs=needs)


def _rate(name: str, config: RateConfig, reference: Trajectory, *, recall: bool) -> Scorer:
    matches = CallMatcher(config)
    what = "reference calls" if recall else "tool calls"

    def check(agent: Trajectory) -> Outcome:
        matching = max_matching(reference.calls, agent.calls, matches)
        matched = sum(1 for a in matching if a >= 0)
        total = len(reference.calls) if recall else len(agent.calls)
        if not total:
            return fail(f"no {what} to measure (0/0)")
        fraction = matched / total
        if fraction >= config.min:
            return Outcome(Status.PASS, fraction)
        return Outcome(Status.FAIL, fraction, f"{matched}/{total} below {config.min:g}")

    return Scorer(
        name,
        f"{name} >= {config.min:g} ({_args_label(config)})",
        observe=_observed(check),
        needs=_needs(config),
    )


@reference_scorer("trajectory_precision", RateConfig, shorthand="min")
def trajectory_precision(config: RateConfig, reference: Trajectory) -> Scorer:
    """Matched calls / agent calls (a maximum matching), passing at >= min."""
    return _rate("trajectory_precision", config, reference, recall=False)


@reference_scorer("trajectory_recall", RateConfig, shorthand="min")
def trajectory_recall(config: RateConfig, reference: Trajectory) -> Scorer:
    """Matched calls / reference calls (a maximum matching), passing at >= min."""
    return _rate("trajectory_recall", config, reference, recall=True)


def _bounds(low: int, high: int | None) -> str:
    if high is None:
        return f">= {low}"
    return f"{low}" if low == high else f"{low}..{high}"


@scorer("tool_called", ToolCalledConfig, shorthand="tool")
def tool_called(config: ToolCalledConfig) -> Scorer:
    """Pass when the calls to the tool (with arguments including `args`) number in [min, max]."""

    def check(agent: Trajectory) -> Outcome:
        count = sum(
            1
            for call in agent.calls
            if call.tool == config.tool and args_agree("superset", call.args, config.args)
        )
        if count < config.min or (config.max is not None and count > config.max):
            times = "time" if count == 1 else "times"
            return fail(
                f"{config.tool} called {count} {times} (wanted {_bounds(config.min, config.max)})"
            )
        return PASS

    with_args = " with given args" if config.args else ""
    label = f"tool_called {config.tool}{with_args} {_bounds(config.min, config.max)}"
    return Scorer(
        "tool_called",
        label,
        observe=_observed(check),
        needs=WITH_ARGUMENTS if config.args else NAMES,
    )


@scorer("tool_not_called", ToolNotCalledConfig, shorthand="tool")
def tool_not_called(config: ToolNotCalledConfig) -> Scorer:
    """Pass when none of the forbidden tools was called."""
    forbidden = frozenset(config.tool)

    def check(agent: Trajectory) -> Outcome:
        called = sorted({call.tool for call in agent.calls if call.tool in forbidden})
        return fail(clamp("called " + ", ".join(called))) if called else PASS

    label = "tool_not_called " + ", ".join(config.tool)
    return Scorer("tool_not_called", label, observe=_observed(check), needs=NAMES)


@scorer("max_tool_calls", MaxToolCallsConfig, shorthand="max")
def max_tool_calls(config: MaxToolCallsConfig) -> Scorer:
    """Pass when the agent made at most `max` calls."""

    def check(agent: Trajectory) -> Outcome:
        count = len(agent.calls)
        return PASS if count <= config.max else fail(f"{count} tool calls (max {config.max})")

    return Scorer(
        "max_tool_calls", f"max_tool_calls {config.max}", observe=_observed(check), needs=NAMES
    )


@scorer("tool_errors", ToolErrorsConfig, shorthand="max")
def tool_errors(config: ToolErrorsConfig) -> Scorer:
    """Pass when at most `max` of the agent's calls failed."""

    def check(agent: Trajectory) -> Outcome:
        failed = [call for call in agent.calls if call.failed]
        if len(failed) <= config.max:
            return PASS
        names = ", ".join(dict.fromkeys(tool_label(call.tool) for call in failed))
        calls = "call" if len(failed) == 1 else "calls"
        return fail(clamp(f"{len(failed)} failed tool {calls} (max {config.max}): {names}"))

    return Scorer(
        "tool_errors",
        f"tool_errors max {config.max}",
        observe=_observed(check),
        needs=NAMES | {Evidence.TOOL_STATUS},
    )
