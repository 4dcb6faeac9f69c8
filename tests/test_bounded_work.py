"""Bounded work (issue 34, item 5): trial figures in time linear in the trials, trajectory
matching within its stated complexity, and outputs of more than `MAX_TOOL_CALLS_PER_OUTPUT`
tool calls refused at intake.

The time bounds are generous (a shared machine of two cores); each test prints what it measured.
Before this change: 2 cases × 10,000 trials took 24 s to settle (`math.comb` for every k), one
`in_order` check of 100 reference steps against 10,000 calls 11–24 s (40 s on a busy machine), and
outputs of 100,000 calls were read and matched whatever their size (the issue measured 726 s and
1.9 GB for three).
"""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import scipy.stats
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import maximum_bipartite_matching
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.hashing import OutputHasher
from assay.intake.otlp import record as otlp
from assay.intake.record import MAX_TOOL_CALLS_PER_OUTPUT, TooManyCalls
from assay.otel.traces import Span
from assay.outputs.candidate import CandidateOutput, parse_line
from assay.outputs.index import index_outputs
from assay.runs.metrics import tally
from assay.runs.scoring import CompiledSuite, score_outputs
from assay.runs.trials import MAX_REPORTED_K, settle_cases, trial_figures
from assay.scorers import Observation, ScorerSpec, Status
from assay.stats import pass_at_k, pass_pow_k
from assay.suites.suite import parse_suite
from assay.trajectory import ToolCall, Trajectory

FIXTURES = Path(__file__).resolve().parent / "fixtures"

# --- trial figures --------------------------------------------------------------------------


def test_two_cases_of_10000_trials_score_and_settle_in_under_5_s() -> None:
    suite = parse_suite(
        "suite: many-trials\n"
        "trials: {min: 3, case_passes: majority}\n"
        "defaults: [{contains: ok}]\n"
        "cases:\n  - {id: a, input: qa}\n  - {id: b, input: qb}\n",
        "s.yaml",
    )
    trials = 10_000
    outputs = [
        CandidateOutput(case_id=case, trial=t + 1, output="ok" if t % passes else "no")
        for case, passes in (("a", 3), ("b", 4))
        for t in range(trials)
    ]
    started = time.perf_counter()
    evidence = score_outputs(CompiledSuite.compile(suite), outputs, OutputHasher(b"k"))
    settled = settle_cases(lambda: evidence, suite.trials, tally(evidence), suite)
    took = time.perf_counter() - started
    print(f"\n2 cases × {trials:,} trials scored and settled in {took:.2f} s")
    assert took < 5
    figures = settled.trials
    assert figures is not None and (figures.trials, figures.k_min) == (2 * trials, trials)
    assert list(figures.pass_at_k) == [str(k) for k in range(1, MAX_REPORTED_K + 1)]
    passed = {"a": trials - math.ceil(trials / 3), "b": trials - math.ceil(trials / 4)}
    assert figures.pass_pow_k["1"] == pytest.approx(sum(passed.values()) / (2 * trials))
    assert figures.pass_pow_k["2"] == pytest.approx(
        sum(c * (c - 1) / (trials * (trials - 1)) for c in passed.values()) / 2
    )


def test_the_figures_equal_the_big_integer_ratios_to_1e_12() -> None:
    """The figures the previous code computed exactly (Python's big-integer `math.comb`; the
    ratio of two integers is rounded once), for every n <= 60, c and k."""
    worst = 0.0
    for n in range(1, 61):
        for c in range(n + 1):
            at_k, pow_k = pass_at_k(n, c, n), pass_pow_k(n, c, n)
            for k in range(1, n + 1):
                exact_pow = Fraction(math.comb(c, k), math.comb(n, k))
                worst = max(
                    worst,
                    abs(pow_k[k - 1] - math.comb(c, k) / math.comb(n, k)),
                    abs(at_k[k - 1] - (1.0 - math.comb(n - c, k) / math.comb(n, k))),
                    float(abs(Fraction(pow_k[k - 1]) - exact_pow)),
                )
    print(f"\nlargest difference from the exact figures: {worst:.1e}")
    assert worst < 1e-12


@pytest.mark.parametrize("n", [100, 1_000, 10_000, 100_000])
def test_the_figures_equal_scipy_hypergeometric_probabilities(n: int) -> None:
    """pass^k is the hypergeometric probability that all k drawn passed, pass@k that not none
    did (scipy.stats.hypergeom: population n, c successes, k draws)."""
    k = np.arange(1, MAX_REPORTED_K + 1)
    for c in sorted({0, 1, 2, n // 10, n // 3, n // 2, n - 2, n - 1, n}):
        pow_k = np.array(pass_pow_k(n, c, MAX_REPORTED_K))
        at_k = np.array(pass_at_k(n, c, MAX_REPORTED_K))
        want_pow = scipy.stats.hypergeom.pmf(k, n, c, k)
        want_at = scipy.stats.hypergeom.sf(0, n, c, k)
        np.testing.assert_allclose(pow_k, want_pow, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(at_k, want_at, rtol=1e-12, atol=1e-15)
        assert list(pow_k == 0) == list(want_pow == 0)  # exactly 0 once k > c


def test_pass_k_is_reported_up_to_max_reported_k() -> None:
    few = trial_figures({"a": (3, 2), "b": (4, 4)})
    assert few is not None and list(few.pass_at_k) == ["1", "2", "3"]
    many = trial_figures({"a": (150, 75), "b": (200, 1)})
    assert many is not None and many.k_min == 150
    assert list(many.pass_pow_k) == [str(k) for k in range(1, MAX_REPORTED_K + 1)]
    assert many.pass_at_k["100"] == pytest.approx(
        (
            1
            - math.comb(75, 100) / math.comb(150, 100)
            + 1
            - math.comb(199, 100) / math.comb(200, 100)
        )
        / 2,
        abs=1e-12,
    )


# --- trajectory matching --------------------------------------------------------------------


def _trail(steps: list[list[tuple[str, dict[str, Any]]]]) -> Trajectory:
    return Trajectory(tuple(tuple(ToolCall(t, a) for t, a in step) for step in steps))


def _shapes(steps: int, calls: int) -> dict[str, tuple[Trajectory, Trajectory]]:
    """(reference, agent) of `steps` reference steps against `calls` agent calls."""
    tools = ("search", "get_order", "refund", "send_email")
    every = calls // steps
    mixed = [
        [(tools[(a // every) % 4], {"q": a // every})]
        if a % every == every - 1
        else [(tools[a % 4], {"q": -a})]
        for a in range(calls)
    ]
    one_tool = [[("search", {"q": i})] for i in range(steps)]
    return {
        "calls to four tools, the reference's among them": (
            _trail([[(tools[i % 4], {"q": i})] for i in range(steps)]),
            _trail(mixed),
        ),
        "every call to one tool, the reference's last": (
            _trail(one_tool),
            _trail(
                [
                    [("search", {"q": a % steps if a >= calls - steps else -a - 1})]
                    for a in range(calls)
                ]
            ),
        ),
        "the last reference step never called": (
            _trail([*one_tool[:-1], [("refund", {})]]),
            _trail([[("search", {"q": a})] for a in range(calls)]),
        ),
        "every call in one parallel step": (
            _trail(one_tool),
            _trail([[("search", {"q": a}) for a in range(calls)]]),
        ),
    }


ARG_MODES: tuple[Any, ...] = ("exact", "ignore", "subset", "superset", ["q"])


def test_one_check_of_100_reference_steps_against_10000_calls_takes_under_2_s() -> None:
    worst = (0.0, "")
    for shape, (reference, agent) in _shapes(100, 10_000).items():
        for args, kind in itertools.product(ARG_MODES, ("trajectory", "trajectory_recall")):
            options = (
                {"args_by_tool": {"search": args}} if isinstance(args, list) else {"args": args}
            )
            matches = ("exact", "in_order", "any_order", "unordered", "subset")
            for match in matches if kind == "trajectory" else ("recall",):
                raw = (
                    {kind: {"match": match, **options}}
                    if kind == "trajectory"
                    else {kind: {"min": 0.5, **options}}
                )
                check = ScorerSpec.model_validate(raw).build(reference)
                started = time.perf_counter()
                check(Observation("text", agent))
                took = time.perf_counter() - started
                worst = max(worst, (took, f"{kind} {match}, args {args}, {shape}"))
    took, which = worst
    print(f"\nslowest check of 100 reference steps against 10,000 calls: {took:.3f} s ({which})")
    assert took < 2


def _saturated(edges: list[list[int]], agents: int) -> int:
    """The size of a maximum matching, by scipy over the full graph (no candidate kept out)."""
    rows = [r for r, found in enumerate(edges) for _ in found]
    if not rows or not agents:
        return 0
    cols = [a for found in edges for a in found]
    graph = csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(edges), agents))
    return int((maximum_bipartite_matching(graph, perm_type="column") >= 0).sum())


def _agree(mode: Any, agent: dict[str, Any], reference: dict[str, Any]) -> bool:
    """docs/agents.md's args modes, written out (values compared as JSON: 1 == 1.0, true != 1)."""

    def same(x: Any, y: Any) -> bool:
        return json.dumps(x, sort_keys=True) == json.dumps(y, sort_keys=True) or (
            type(x) in (int, float) and type(y) in (int, float) and x == y
        )

    if mode == "ignore":
        return True
    if mode == "exact":
        return agent.keys() == reference.keys() and all(same(agent[k], reference[k]) for k in agent)
    if mode == "subset":
        return all(k in reference and same(agent[k], reference[k]) for k in agent)
    if mode == "superset":
        return all(k in agent and same(agent[k], reference[k]) for k in reference)
    return all(
        (k in agent) == (k in reference) and same(agent.get(k), reference.get(k)) for k in mode
    )


def _in_order_by_cut_search(agent: Trajectory, reference: Trajectory, mode: Any) -> bool:
    """`in_order` as docs/agents.md defines it: the cuts between reference steps tried one by
    one, smallest first, each with a full maximum matching of every reference call so far."""
    calls = [(s, c) for s, step in enumerate(agent.steps) for c in step]
    refs = [(k, c) for k, step in enumerate(reference.steps) for c in step]
    cuts: list[int] = []
    for k in range(len(reference.steps)):
        upto = [r for r in refs if r[0] <= k]
        for cut in range(cuts[-1] if cuts else 0, len(agent.steps)):
            bounds = [*cuts, cut]
            lows = [0, *bounds]
            edges = [
                [
                    a
                    for a, (s, c) in enumerate(calls)
                    if c.tool == ref.tool
                    and _agree(mode, c.args, ref.args)
                    and lows[step] <= s <= bounds[step]
                ]
                for step, ref in upto
            ]
            if _saturated(edges, len(calls)) == len(upto):
                cuts.append(cut)
                break
        else:
            return False
    return True


def _random_trajectory(rng: random.Random, steps: int, width: int) -> Trajectory:
    args = ({}, {"q": 1}, {"q": 2}, {"q": 1.0}, {"q": True}, {"q": 1, "x": [1, {"y": None}]})
    return _trail(
        [
            [(rng.choice("ab"), dict(rng.choice(args))) for _ in range(rng.randint(1, width))]
            for _ in range(rng.randint(0, steps))
        ]
    )


def test_matching_equals_full_matchings_on_larger_random_trajectories() -> None:
    """Against scipy's maximum matching over every candidate (no hashing, no candidate kept
    out) and, for `in_order`, the cut search it replaces — on trajectories too large for the
    brute force of tests/test_trajectory.py."""
    rng = random.Random(34_5)
    verdicts: dict[str, int] = {}
    for _ in range(300):
        reference = _random_trajectory(rng, 6, 3)
        agent = _random_trajectory(rng, 20, 3)
        mode = rng.choice(ARG_MODES)
        options = (
            {"args_by_tool": {"a": mode, "b": mode}} if isinstance(mode, list) else {"args": mode}
        )
        observed = Observation("text", agent)
        expected = _in_order_by_cut_search(agent, reference, mode)
        outcome = ScorerSpec.model_validate({"trajectory": {"match": "in_order", **options}}).build(
            reference
        )(observed)
        assert (outcome.status is Status.PASS) is expected, (mode, agent, reference)
        verdicts[f"in_order {expected}"] = verdicts.get(f"in_order {expected}", 0) + 1
        edges = [
            [
                a
                for a, c in enumerate(agent.calls)
                if c.tool == r.tool and _agree(mode, c.args, r.args)
            ]
            for r in reference.calls
        ]
        if reference.calls:
            recall = ScorerSpec.model_validate(
                {"trajectory_recall": {"min": 0.5, **options}}
            ).build(reference)(observed)
            matched = _saturated(edges, len(agent.calls))
            assert recall.score == pytest.approx(matched / len(reference.calls))
    assert min(verdicts.values()) >= 50, verdicts


# --- tool calls per output, at intake --------------------------------------------------------


def _messages(form: str, calls: int) -> list[dict[str, Any]]:
    """A message list of `calls` tool calls (one response requests them all) in `form`."""
    if form == "openai-chat":
        requested = [
            {"id": f"c{i}", "type": "function", "function": {"name": "search", "arguments": "{}"}}
            for i in range(calls)
        ]
        return [{"role": "assistant", "content": None, "tool_calls": requested}]
    if form == "openai-responses":
        return [
            {"type": "function_call", "name": "search", "call_id": f"c{i}", "arguments": "{}"}
            for i in range(calls)
        ]
    if form == "anthropic":
        blocks = [
            {"type": "tool_use", "id": f"t{i}", "name": "search", "input": {}} for i in range(calls)
        ]
        return [{"role": "assistant", "content": blocks}]
    requested = [{"name": "search", "args": {}, "id": f"c{i}"} for i in range(calls)]
    return [{"type": "ai", "data": {"content": "", "tool_calls": requested}}]


REFUSED = (
    f"{MAX_TOOL_CALLS_PER_OUTPUT + 1:,} tool calls: an output may hold at most"
    f" {MAX_TOOL_CALLS_PER_OUTPUT:,} (MAX_TOOL_CALLS_PER_OUTPUT)"
)


@pytest.mark.parametrize("form", ["openai-chat", "openai-responses", "anthropic", "langchain"])
def test_messages_of_more_than_max_tool_calls_are_refused_naming_file_line_and_field(
    form: str,
) -> None:
    most = json.dumps(
        {"case_id": "a", "output": "x", "messages": _messages(form, MAX_TOOL_CALLS_PER_OUTPUT)}
    )
    record = parse_line(most.encode(), "out.jsonl", 1)
    assert (
        record.trajectory is not None and len(record.trajectory.calls) == MAX_TOOL_CALLS_PER_OUTPUT
    )
    assert record.record is not None and record.record.source == form
    over = json.dumps(
        {"case_id": "a", "output": "x", "messages": _messages(form, MAX_TOOL_CALLS_PER_OUTPUT + 1)}
    )
    with pytest.raises(InputError) as info:
        parse_line(over.encode(), "out.jsonl", 7)
    assert str(info.value) == f"out.jsonl line 7, field messages: {REFUSED}"


def test_three_outputs_of_100000_calls_are_refused_at_intake_in_one_line(
    store_dir: Path, tmp_path: Path
) -> None:
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "suite: busy\ncases:\n"
        + "".join(
            f"  - {{id: {c}, input: q, expected_trajectory: [{{tool: search}}],"
            " scorers: [{trajectory: {match: in_order, args: ignore}}]}\n"
            for c in "abc"
        )
    )
    call = '{"id": "c%d", "type": "function", "function": {"name": "search", "arguments": "{}"}}'
    requested = ", ".join(call % i for i in range(100_000))
    outputs = tmp_path / "busy.jsonl"
    outputs.write_text(
        "".join(
            f'{{"case_id": "{c}", "output": "done", "messages": [{{"role": "assistant",'
            f' "content": null, "tool_calls": [{requested}]}}]}}\n'
            for c in "abc"
        )
    )
    started = time.perf_counter()
    result = CliRunner().invoke(app, ["run", str(suite), "--outputs", str(outputs)])
    took = time.perf_counter() - started
    size = outputs.stat().st_size / 1e6
    print(f"\n3 outputs of 100,000 calls ({size:.0f} MB) refused in {took:.2f} s")
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert (
        f"{outputs} line 1, field messages: 100,000 tool calls: an output may hold at most"
        in lines[0]
    )
    assert took < 30
    assert not any("runs" in p.parts for p in store_dir.rglob("*"))  # before any run started


def test_a_transcript_of_more_than_max_tool_calls_is_refused_naming_its_file(
    tmp_path: Path,
) -> None:
    document = json.loads((FIXTURES / "transcripts" / "atif" / "parallel.json").read_text())
    step = next(s for s in document["steps"] if s.get("tool_calls"))
    first = step["tool_calls"][0]
    step.pop("observation")
    for calls in (MAX_TOOL_CALLS_PER_OUTPUT, MAX_TOOL_CALLS_PER_OUTPUT + 1):
        step["tool_calls"] = [{**first, "tool_call_id": f"c{i}"} for i in range(calls)]
        path = tmp_path / "busy-case.json"
        path.write_text(json.dumps(document))
        if calls == MAX_TOOL_CALLS_PER_OUTPUT:
            assert index_outputs(str(path), {"busy-case"}, ["busy-case"], 10).seen == 1
            continue
        with pytest.raises(InputError) as info:
            index_outputs(str(path), {"busy-case"}, ["busy-case"], 10)
        assert str(info.value) == f"{path}: {REFUSED}"


def _span(number: int, parent: str | None, attributes: dict[str, Any]) -> Span:
    return Span(
        trace_id="ab" * 16,
        span_id=f"{number:016x}",
        parent_span_id=parent,
        start_ns=1_000 + 10 * number,
        end_ns=1_005 + 10 * number,
        status_code=0,
        attributes=attributes,
        resource={},
        where=f"resourceSpans[0].scopeSpans[0].spans[{number}]",
    )


def test_a_trace_of_100000_tool_spans_is_refused_before_its_calls_are_joined() -> None:
    case = _span(0, None, {"assay.case_id": "a"})
    tools = [
        _span(
            n, case.span_id, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
        )
        for n in range(1, 100_001)
    ]
    started = time.perf_counter()
    with pytest.raises(TooManyCalls) as info:
        otlp.read(case, [case, *tools])
    took = time.perf_counter() - started
    print(f"\na trace of 100,000 tool spans refused in {took:.2f} s")
    assert info.value.problem.startswith("100,000 tool calls: an output may hold at most 5,000")
    assert took < 10
    record = otlp.read(case, [case, *tools[:MAX_TOOL_CALLS_PER_OUTPUT]])
    assert len(record.trajectory.calls) == MAX_TOOL_CALLS_PER_OUTPUT


def test_a_trace_export_of_more_than_max_tool_calls_is_refused_at_indexing(
    tmp_path: Path,
) -> None:
    """Refused where every input error is (file, line, span), before any chunk reads it."""
    from assay.errors import InputError
    from assay.outputs.index import index_outputs
    from tests.otel_agent import otlp_json, tool_agent_traces

    calls = [("search", {"q": n}, False) for n in range(MAX_TOOL_CALLS_PER_OUTPUT + 1)]
    path = tmp_path / "traces.json"
    path.write_text(otlp_json(tool_agent_traces([{"case_id": "a", "text": "t", "steps": [calls]}])))
    with pytest.raises(InputError) as info:
        index_outputs(str(path), {"a"}, ["a"], 10)
    assert info.value.source == str(path) and info.value.line == 1
    assert "5,001 tool calls: an output may hold at most 5,000" in str(info.value)


def test_inspect_names_the_file_of_a_trace_over_the_call_cap(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assay.cli import app
    from tests.otel_agent import otlp_json, tool_agent_traces

    calls = [("search", {"q": n}, False) for n in range(MAX_TOOL_CALLS_PER_OUTPUT + 1)]
    path = tmp_path / "traces.json"
    path.write_text(otlp_json(tool_agent_traces([{"case_id": "a", "text": "t", "steps": [calls]}])))
    shown = CliRunner().invoke(app, ["outputs", "inspect", str(path)])
    assert shown.exit_code == 2
    assert f"{path}: 5,001 tool calls" in " ".join(shown.output.split())
