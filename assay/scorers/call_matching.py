"""Which agent calls match which reference calls: arguments agreeing under an `args` mode, the
calls hashing files together, and a maximum bipartite matching over them.

Matching is an assignment, never first-fit: a reference call that a first-fit matcher would give
to the wrong agent call still finds its own. Its cost is bounded and stated where the work is
done (the `# --- matching` notes, `max_matching`): a reference call is compared only with the
agent calls hashing finds for it and keeps at most as many candidates as there are reference
calls.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from itertools import islice
from typing import Annotated, Any, Final, Literal, get_args

from pydantic import Field, field_validator

from assay.errors import shown
from assay.scorers._registry import ScorerConfig
from assay.scorers.structured import json_equivalent
from assay.trajectory import TOOL_NAME, ToolCall

ArgsMode = Literal["exact", "ignore", "subset", "superset"]
ToolName = Annotated[str, Field(pattern=TOOL_NAME.pattern, max_length=128)]
KeyPath = Annotated[str, Field(pattern=r"^[^.]+(\.[^.]+)*$", max_length=200)]


def known_mode(value: Any, allowed: tuple[str, ...], what: str) -> Any:
    """`value` when it is one of `allowed` (or not a string, left to the field's own check)."""
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
        return known_mode(value, get_args(ArgsMode), "args mode")

    @field_validator("args_by_tool", mode="before")
    @classmethod
    def _by_tool_known(cls, value: Any) -> Any:
        if isinstance(value, dict):
            for mode in value.values():
                known_mode(mode, get_args(ArgsMode), "args mode")
        return value


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
