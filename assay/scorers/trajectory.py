"""Trajectory scorers: the tools an agent called, with which arguments, in which order.

`trajectory`, `trajectory_precision` and `trajectory_recall` compare the agent's calls with the
case's `expected_trajectory` (see `assay.trajectory`); `tool_called`, `tool_not_called`,
`max_tool_calls` and `tool_errors` need no reference. docs/agents.md states every mode exactly.

Matching is a maximum bipartite matching (an assignment), never first-fit: a reference call that
a first-fit matcher would give to the wrong agent call still finds its own. Its cost is bounded
and stated where the work is done (the `# --- matching` notes, `max_matching`, `_in_order`): a
reference call is compared only with the agent calls hashing finds for it and keeps at most as
many candidates as there are reference calls. Labels name tools and the first mismatch, never an
argument value; an agent's tool name that does not look like one is not echoed.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from itertools import islice
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import Field, field_validator

from assay.errors import shown
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
from assay.scorers.structured import json_equivalent
from assay.trajectory import TOOL_NAME, ToolCall, Trajectory

ArgsMode = Literal["exact", "ignore", "subset", "superset"]
MatchMode = Literal["exact", "in_order", "any_order", "unordered", "subset"]
ToolName = Annotated[str, Field(pattern=TOOL_NAME.pattern, max_length=128)]
KeyPath = Annotated[str, Field(pattern=r"^[^.]+(\.[^.]+)*$", max_length=200)]

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


def _known(value: Any, allowed: tuple[str, ...], what: str) -> Any:
    if isinstance(value, str) and value not in allowed:
        raise ValueError(f"unknown {what} {shown(value, 40)} (known: {', '.join(allowed)})")
    return value


class ArgsConfig(ScorerConfig):
    """How a reference call's arguments must agree with an agent call's."""

    args: ArgsMode = "exact"
    args_by_tool: dict[ToolName, ArgsMode | list[KeyPath]] = Field(default_factory=dict)
    """Per tool: a mode, or the dotted key paths whose values must be equal."""

    @field_validator("args", mode="before")
    @classmethod
    def _args_known(cls, value: Any) -> Any:
        return _known(value, get_args(ArgsMode), "args mode")

    @field_validator("args_by_tool", mode="before")
    @classmethod
    def _by_tool_known(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for mode in value.values():
                _known(mode, get_args(ArgsMode), "args mode")
        return value


class TrajectoryConfig(ArgsConfig):
    """`trajectory`: the agent's calls match the reference under `match`."""

    match: MatchMode = "exact"

    @field_validator("match", mode="before")
    @classmethod
    def _match_known(cls, value: Any) -> Any:
        return _known(value, get_args(MatchMode), "match mode")


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


# --- arguments ------------------------------------------------------------------------------

_MISSING: Final = object()


def _at(args: dict[str, Any], path: str) -> Any:
    node: Any = args
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return _MISSING
        node = node[key]
    return node


def _same(left: Any, right: Any) -> bool:
    if left is _MISSING or right is _MISSING:
        return left is right
    return json_equivalent(left, right)


def args_agree(
    mode: ArgsMode | list[str], agent: dict[str, Any], reference: dict[str, Any]
) -> bool:
    """Whether an agent call's arguments agree with a reference call's under `mode`."""
    if isinstance(mode, list):
        return all(_same(_at(agent, path), _at(reference, path)) for path in mode)
    if mode == "ignore":
        return True
    if mode == "exact":
        return json_equivalent(agent, reference)
    if mode == "subset":
        return all(
            key in reference and json_equivalent(agent[key], reference[key]) for key in agent
        )
    return all(key in agent and json_equivalent(agent[key], reference[key]) for key in reference)


class CallMatcher:
    """Whether an agent call matches a reference call under an args configuration: the same
    tool, and arguments agreeing under the args mode in force for the reference call's tool.

    `index` and `pool` narrow the search: a reference call is compared only with the agent
    calls filed under the keys it looks up (found by hashing), which hold every one that
    matches it."""

    def __init__(self, config: ArgsConfig) -> None:
        self._args: ArgsMode = config.args
        self._by_tool = config.args_by_tool

    def _mode(self, tool: str) -> ArgsMode | list[str]:
        return self._by_tool.get(tool, self._args)

    def __call__(self, agent: ToolCall, reference: ToolCall) -> bool:
        return agent.tool == reference.tool and args_agree(
            self._mode(reference.tool), agent.args, reference.args
        )

    def _keys(self, call: ToolCall) -> list[Hashable]:
        """The keys an agent call is filed under: its tool with its arguments (`exact`), the
        values at the key paths, each of its arguments and none (`superset`), its first
        argument by name (`subset`; none without any), or none (`ignore`)."""
        tool, mode, args = call.tool, self._mode(call.tool), call.args
        if isinstance(mode, list):
            return [(tool, tuple(_digest(_at(args, path)) for path in mode))]
        if mode == "exact":
            return [(tool, _digest(args))]
        if mode == "superset":
            return [(tool, None), *((tool, key, _digest(value)) for key, value in args.items())]
        if mode == "subset" and args:
            first = min(args)
            return [(tool, first, _digest(args[first]))]
        return [(tool, None)]

    def index(self, agents: Sequence[ToolCall]) -> dict[Hashable, list[int]]:
        """The agent calls' indexes (ascending) under each of their keys."""
        filed: dict[Hashable, list[int]] = {}
        for a, call in enumerate(agents):
            for key in self._keys(call):
                filed.setdefault(key, []).append(a)
        return filed

    def pool(self, reference: ToolCall, filed: Mapping[Hashable, list[int]]) -> list[int]:
        """The agent calls (ascending indexes) that may match `reference`: all that do."""
        tool, mode, args = reference.tool, self._mode(reference.tool), reference.args
        if mode == "superset" and args:  # a match holds each argument: the rarest one's calls
            return min(
                (filed.get((tool, key, _digest(value)), []) for key, value in args.items()),
                key=len,
            )
        if mode == "subset":  # a match's first argument is one of these, or it has none
            held = (filed.get((tool, key, _digest(value)), []) for key, value in args.items())
            return sorted(set(filed.get((tool, None), [])).union(*held))
        return filed.get(self._keys(reference)[0], [])


def _digest(value: Any) -> Hashable:
    """A hashable stand-in for a JSON value, equal for `json_equivalent` values (equal numbers
    hash alike, so `1` and `1.0` agree; `true` and `1` collide, which comparing tells apart)."""
    if isinstance(value, dict):
        return frozenset((key, _digest(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(_digest(item) for item in value)
    return value if isinstance(value, Hashable) else None


# --- matching -------------------------------------------------------------------------------
#
# A = agent calls, R = reference calls. C = argument comparisons: one for each agent call in a
# reference call's `CallMatcher.pool` — under `exact` and key paths the calls with equal
# arguments or values (each a match unless `true` and `1` collide), under `superset` those that
# hold the reference's rarest argument, under `subset` those whose first argument it holds (or
# that have none), under `ignore` every call to the tool (each a match); at worst R·A, which
# `MAX_TOOL_CALLS_PER_OUTPUT` bounds at intake. A reference call keeps at most R candidates: any
# R of them leave a maximum matching as large (at most R − 1 of them are taken by the other
# reference calls), so the graph has E <= R² edges however many calls the agent made.


def candidates(
    references: Sequence[ToolCall], agents: Sequence[ToolCall], matches: CallMatcher
) -> list[list[int]]:
    """For each reference call, the first (at most R) agent calls that match it, ascending:
    O(A + R + C)."""
    filed = matches.index(agents)
    return [
        list(
            islice(
                (a for a in matches.pool(ref, filed) if matches(agents[a], ref)), len(references)
            )
        )
        for ref in references
    ]


def assignment(edges: Sequence[Sequence[int]], agents: int) -> list[int]:
    """A maximum matching of reference calls to agent calls, given each reference call's
    candidate agent calls: for each reference call its agent call's index, or -1.
    Hopcroft–Karp: O(E·√(R + A)) time."""
    rows = [r for r, found in enumerate(edges) for _ in found]
    if not rows or not agents:
        return [-1] * len(edges)
    cols = [a for found in edges for a in found]
    # Imported here: scipy.sparse takes ~0.8 s to import, and every command that loads a suite
    # (the CLI's start-up included) imports this module; only matching needs it.
    import numpy as np
    from scipy.sparse import csr_matrix  # type: ignore[import-untyped]
    from scipy.sparse.csgraph import maximum_bipartite_matching  # type: ignore[import-untyped]

    graph = csr_matrix(
        (np.ones(len(rows), dtype=np.int8), (rows, cols)), shape=(len(edges), agents)
    )
    return [int(a) for a in maximum_bipartite_matching(graph, perm_type="column")]


def max_matching(
    references: Sequence[ToolCall], agents: Sequence[ToolCall], matches: CallMatcher
) -> list[int]:
    """A maximum matching of reference calls to agent calls (see `assignment`):
    O(A + R + C + R²·√(R + A)) time."""
    return assignment(candidates(references, agents, matches), len(agents))


def _name(tool: str) -> str:
    return tool if TOOL_NAME.fullmatch(tool) else "(a tool with an unusual name)"


def _step_names(step: Iterable[ToolCall]) -> str:
    return " + ".join(_name(call.tool) for call in step)


def _steps_names(steps: Sequence[Sequence[ToolCall]]) -> str:
    return ", ".join(_step_names(step) for step in steps) or "nothing"


def _got(expected: str, got: str) -> str:
    return f"{got} with other arguments" if expected == got else got


def _got_steps(expected: Sequence[ToolCall], steps: Sequence[Sequence[ToolCall]]) -> str:
    """What the agent did instead, steps joined by `, ` and calls made together by `+`; when
    the expected tools were all called, the arguments are named as the cause."""
    if not steps:
        return "nothing"
    got = _steps_names(steps)
    called = Counter(call.tool for step in steps for call in step)
    if Counter(call.tool for call in expected) <= called:
        return f"{got} (with other arguments)" if got != _step_names(expected) else _got(got, got)
    return got


def _where(reference: Trajectory, k: int) -> str:
    return f"after {_step_names(reference.steps[k - 1])}" if k else "first"


def _exact(agent: Trajectory, reference: Trajectory, matches: CallMatcher) -> str | None:
    for k in range(max(len(agent.steps), len(reference.steps))):
        if k >= len(reference.steps):
            return f"unexpected {_steps_names(agent.steps[k:])} {_where(reference, k)}"
        wanted = _step_names(reference.steps[k])
        if k >= len(agent.steps):
            return f"expected {wanted} {_where(reference, k)}; got nothing"
        theirs, ours = agent.steps[k], reference.steps[k]
        if len(theirs) != len(ours) or -1 in max_matching(ours, theirs, matches):
            return (
                f"expected {wanted} {_where(reference, k)}; got {_got(wanted, _step_names(theirs))}"
            )
    return None


class _Growing:
    """A matching of reference calls to agent calls in a graph that only gains edges, kept
    maximum by augmenting paths (Kuhn's algorithm) from the free reference calls."""

    def __init__(self, references: int, agents: int) -> None:
        self.mate = [-1] * references
        """Each reference call's agent call, or -1."""
        self.partner = [-1] * agents
        """Each agent call's reference call, or -1."""
        self.edges: list[list[int]] = [[] for _ in range(references)]

    def augment(self, root: int) -> set[int] | None:
        """Match the free reference call `root` along an augmenting path: None when it is
        matched, else the reference calls the search reached — there is no augmenting path
        from `root` until one of them gains an edge or the matching changes. O(E + R) time."""
        mate, partner, edges = self.mate, self.partner, self.edges
        seen: set[int] = set()
        reached = {root}
        path = [root]
        via: list[int] = []  # via[i]: the agent call between path[i] and path[i + 1]
        tried = {root: 0}
        while path:
            here = path[-1]
            found, at = edges[here], tried[here]
            while at < len(found) and found[at] in seen:
                at += 1
            tried[here] = at + 1
            if at == len(found):
                path.pop()
                if via:
                    via.pop()
                continue
            a = found[at]
            seen.add(a)
            via.append(a)
            if partner[a] < 0:
                for ref, call in zip(path, via, strict=True):
                    mate[ref], partner[call] = call, ref
                return None
            path.append(partner[a])
            reached.add(partner[a])
            tried[partner[a]] = 0
        return reached


def _in_order(agent: Trajectory, reference: Trajectory, matches: CallMatcher) -> str | None:
    """Reference steps in order, each within agent steps [cut before, cut after]; each cut the
    smallest that still lets every reference call so far be matched, which is optimal (a later
    step only gains from an earlier cut).

    One pass over the agent steps. A reference step's window grows from the cut before it, one
    agent step that holds a candidate of its calls at a time (compared with the reference call
    only then), and one matching of all reference calls so far grows with it by augmenting paths
    from the step's free calls (`_Growing`). A failed search is tried again only when the
    matching changed or a call it reached gained an edge — to a free agent call, so that search
    succeeds — and a reference step of q calls takes at most q(q + 1) searches of O(E + R).
    Time: O(A + R·log A + q·(R + C) + (q + 1)·R·(E + R)), q the most calls of a reference step,
    E <= R².
    """
    calls, refs = agent.calls, reference.calls
    starts = [0]  # the index of each agent step's first call
    for step in agent.steps:
        starts.append(starts[-1] + len(step))
    step_of = [k for k, step in enumerate(agent.steps) for _ in step]
    filed = matches.index(calls)
    pools = [matches.pool(ref, filed) for ref in refs]  # each compared when its window reaches it
    growing = _Growing(len(refs), len(calls))
    edges, cursor = growing.edges, [0] * len(refs)

    def widen(mine: range, through: int) -> set[int]:
        """Give the calls of `mine` their candidates up to agent step `through`; those that
        gained one."""
        gained = set()
        for r in mine:
            pool, at = pools[r], cursor[r]
            while at < len(pool) and step_of[pool[at]] <= through and len(edges[r]) < len(refs):
                if matches(calls[pool[at]], refs[r]):
                    edges[r].append(pool[at])
                    gained.add(r)
                at += 1
            cursor[r] = at
        return gained

    cut, first = 0, 0
    for k, step in enumerate(reference.steps):
        mine = range(first, first + len(step))
        first += len(step)
        for r in mine:
            cursor[r] = bisect_left(pools[r], starts[cut])
        window = cut
        gained = widen(mine, window)
        failed: dict[int, set[int]] = {}  # a free call: what its last failed search reached
        while True:
            changed = True
            while changed:  # a pass over the step's free calls, again after any was matched
                changed = False
                for r in mine:
                    if growing.mate[r] >= 0 or (r in failed and not failed[r] & gained):
                        continue
                    reached = growing.augment(r)
                    if reached is None:
                        failed.clear()  # the matching changed: every free call may reach more
                        changed = True
                    else:
                        failed[r] = reached
                gained = set()
            if all(growing.mate[r] >= 0 for r in mine):
                break
            ahead = [
                step_of[pools[r][cursor[r]]]
                for r in mine
                if cursor[r] < len(pools[r]) and len(edges[r]) < len(refs)
            ]
            if not ahead:
                used = {growing.mate[r] for r in range(mine.start)}
                left = [
                    [call for a, call in enumerate(agent.steps[s], starts[s]) if a not in used]
                    for s in range(cut, len(agent.steps))
                ]
                return (
                    f"expected {_step_names(step)} {_where(reference, k)}; "
                    f"got {_got_steps(step, [s for s in left if s])}"
                )
            window = min(ahead)
            gained = widen(mine, window)
        cut = window
    return None


def _leftover(
    agent: Trajectory, reference: Trajectory, matching: list[int]
) -> tuple[list[ToolCall], list[ToolCall]]:
    """The agent calls and the reference calls a matching leaves unmatched."""
    taken = {a for a in matching if a >= 0}
    agents = [call for a, call in enumerate(agent.calls) if a not in taken]
    references = [call for r, call in enumerate(reference.calls) if matching[r] < 0]
    return agents, references


def _first(
    left: Sequence[ToolCall], others: Sequence[ToolCall], what: str, note: str
) -> str | None:
    """`missing refund (+2 more)`, noting when the other side has an unmatched call to the same
    tool (so only the arguments kept them apart)."""
    if not left:
        return None
    first = left[0]
    more = f" (+{len(left) - 1} more)" if len(left) > 1 else ""
    same_tool = any(other.tool == first.tool for other in others)
    return f"{what} {_name(first.tool)}{more}" + (f" ({note})" if same_tool else "")


def _missing(agent: Trajectory, reference: Trajectory, matching: list[int]) -> str | None:
    agents, references = _leftover(agent, reference, matching)
    return _first(references, agents, "missing", "called with other arguments")


def _unexpected(agent: Trajectory, reference: Trajectory, matching: list[int]) -> str | None:
    agents, references = _leftover(agent, reference, matching)
    return _first(agents, references, "unexpected", "expected with other arguments")


def trajectory_mismatch(
    mode: MatchMode, agent: Trajectory, reference: Trajectory, matches: CallMatcher
) -> str | None:
    """The first mismatch of `agent` against `reference` under `mode`, or None when they match."""
    if mode == "exact":
        return _exact(agent, reference, matches)
    if mode == "in_order":
        return _in_order(agent, reference, matches)
    matching = max_matching(reference.calls, agent.calls, matches)
    problems = {
        "any_order": [_missing(agent, reference, matching)],
        "subset": [_unexpected(agent, reference, matching)],
        "unordered": [
            _missing(agent, reference, matching),
            _unexpected(agent, reference, matching),
        ],
    }[mode]
    found = [problem for problem in problems if problem]
    return "; ".join(found) or None


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
        names = ", ".join(dict.fromkeys(_name(call.tool) for call in failed))
        calls = "call" if len(failed) == 1 else "calls"
        return fail(clamp(f"{len(failed)} failed tool {calls} (max {config.max}): {names}"))

    return Scorer(
        "tool_errors",
        f"tool_errors max {config.max}",
        observe=_observed(check),
        needs=NAMES | {Evidence.TOOL_STATUS},
    )
