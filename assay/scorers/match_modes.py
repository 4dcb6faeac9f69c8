"""Each `match` mode of the `trajectory` scorer: the first mismatch of an agent's trajectory
against the reference (`trajectory_mismatch`), in words that name tools and never an argument
value; an agent's tool name that does not look like one is not echoed (`tool_label`).

`exact` compares step by step, `in_order` keeps the reference's order over a growing matching
(its cost is stated at `_in_order`), the others take one maximum matching (`max_matching`).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Literal

from assay.scorers.call_matching import CallMatcher, max_matching
from assay.trajectory import TOOL_NAME, ToolCall, Trajectory

MatchMode = Literal["exact", "in_order", "any_order", "unordered", "subset"]


def tool_label(tool: str) -> str:
    """`tool`, or a stand-in when it does not look like a tool name (never echoed)."""
    return tool if TOOL_NAME.fullmatch(tool) else "(a tool with an unusual name)"


def _step_names(step: Iterable[ToolCall]) -> str:
    return " + ".join(tool_label(call.tool) for call in step)


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
    return f"{what} {tool_label(first.tool)}{more}" + (f" ({note})" if same_tool else "")


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
