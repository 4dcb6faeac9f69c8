"""Tool-call trajectories: parsed from messages, referenced by suites, judged by the trajectory
checks — compared with an independent brute-force implementation of docs/agents.md."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.hashing import OutputHasher
from assay.outputs.candidate import CandidateOutput, parse_line
from assay.runs.scoring import CompiledSuite, score_outputs
from assay.scorers import Observation, Outcome, Scorer, ScorerSpec, Status
from assay.suites.suite import parse_suite
from assay.trajectory import ToolCall, Trajectory, reference_trajectory

CANARY = "CANARY-3c9e1d-tool-argument"
HASHER = OutputHasher(b"test-secret")


def call(tool: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(args)},
    }


def refund_messages(*, secret: str = "") -> list[dict[str, Any]]:
    """A refund agent: get_order and get_user together, then refund, which fails once."""
    return [
        {"role": "user", "content": "Refund order 42"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                call("get_order", "c1", order_id=42),
                call("get_user", "c2", note=secret),
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": f"order 42 {secret}"},
        {"role": "tool", "tool_call_id": "c2", "content": "user 7"},
        {"role": "assistant", "tool_calls": [call("refund", "c3", order_id=42)]},
        {"role": "tool", "tool_call_id": "c3", "content": "timeout", "is_error": True},
        {"role": "assistant", "tool_calls": [call("refund", "c4", order_id=42)]},
        {"role": "tool", "tool_call_id": "c4", "content": "ok"},
        {"role": "assistant", "content": [{"type": "text", "text": "Refunded order 42."}]},
    ]


def record(**fields: Any) -> CandidateOutput:
    return parse_line(json.dumps({"case_id": "c", **fields}).encode(), "out.jsonl", 3)


def check(raw: Any, trajectory: Trajectory | None, reference: Trajectory | None = None) -> Outcome:
    spec = ScorerSpec.model_validate(raw)
    return spec.build(reference)(Observation("text", trajectory))


def trail(*steps: Sequence[tuple[str, dict[str, Any]]] | tuple[str, dict[str, Any]]) -> Trajectory:
    """A trajectory from steps: a (tool, args) pair is one call, a list of pairs a parallel step."""
    return Trajectory(
        tuple(
            tuple(ToolCall(t, a) for t, a in (step if isinstance(step, list) else [step]))
            for step in steps
        )
    )


# --- outputs carry the trajectory -----------------------------------------------------------


def test_messages_give_parallel_steps_failed_calls_and_the_final_text() -> None:
    output = record(messages=refund_messages())
    assert output.output == "Refunded order 42."
    trajectory = output.trajectory
    assert trajectory is not None
    assert [[c.tool for c in step] for step in trajectory.steps] == [
        ["get_order", "get_user"],
        ["refund"],
        ["refund"],
    ]
    assert [c.failed for c in trajectory.calls] == [False, False, True, False]
    assert trajectory.calls[0].args == {"order_id": 42}
    assert trajectory.calls[0].call_id == "c1"


def test_output_wins_over_messages_and_a_record_without_either_is_refused() -> None:
    assert record(output="given", messages=refund_messages()).output == "given"
    assert record(output="plain").trajectory is None
    with pytest.raises(InputError) as info:
        record(messages=[{"role": "user", "content": "hi"}])
    assert info.value.field == "output"


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ('{"order_id": 42', "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"x": NaN}', "not valid JSON"),
    ],
)
def test_bad_arguments_name_file_line_and_field(arguments: str, problem: str) -> None:
    messages = refund_messages()
    messages[4]["tool_calls"][0]["function"]["arguments"] = arguments
    with pytest.raises(InputError) as info:
        record(messages=messages)
    error = info.value
    assert (error.source, error.line) == ("out.jsonl", 3)
    assert error.field == "messages[4].tool_calls[0].function.arguments"
    assert problem in error.problem
    assert "order_id" not in str(error)


def test_empty_arguments_are_no_arguments() -> None:
    messages = [{"role": "assistant", "content": "x", "tool_calls": [call("ping", "p")]}]
    messages[0]["tool_calls"][0]["function"]["arguments"] = ""
    trajectory = record(messages=messages).trajectory
    assert trajectory is not None and trajectory.calls[0].args == {}


# --- suites hold the reference --------------------------------------------------------------

AGENT_SUITE = """
suite: refunds
cases:
  - id: refund-42
    input: Refund order 42
    expected_trajectory:
      - [{tool: get_order, args: {order_id: 42}}, {tool: get_user}]
      - {tool: refund, args: {order_id: 42}}
    scorers:
      - trajectory: {match: in_order, args_by_tool: {get_user: ignore}}
      - tool_not_called: delete_account
      - tool_errors: {max: 1}
"""


def test_expected_trajectory_is_hashed_and_a_one_call_step_is_the_call() -> None:
    suite = parse_suite(AGENT_SUITE, "s.yaml")
    written_as_list = AGENT_SUITE.replace(
        "- {tool: refund, args: {order_id: 42}}", "- [{tool: refund, args: {order_id: 42}}]"
    )
    assert parse_suite(written_as_list, "s.yaml").content_hash == suite.content_hash
    other_args = AGENT_SUITE.replace("{tool: refund, args: {order_id: 42}}", "{tool: refund}")
    assert parse_suite(other_args, "s.yaml").content_hash != suite.content_hash
    dumped = suite.cases[0].model_dump(mode="json")["expected_trajectory"]
    assert dumped[1] == {"tool": "refund", "args": {"order_id": 42}}
    assert dumped[0][1] == {"tool": "get_user", "args": {}}


def test_a_suite_without_trajectories_dumps_no_trajectory_field() -> None:
    suite = parse_suite("suite: s\ncases:\n  - {id: a, input: q, scorers: [json_valid]}\n", "s")
    assert "expected_trajectory" not in suite.canonical.text


@pytest.mark.parametrize(
    ("scorer", "named"),
    [
        ("trajectory: {match: fuzzy}", "unknown match mode 'fuzzy'"),
        ("trajectory: {args: loose}", "unknown args mode 'loose'"),
        ("trajectory: {args_by_tool: {refund: nearly}}", "unknown args mode 'nearly'"),
        ("tool_called: {tool: refund, min: 3, max: 1}", "max (1) is below min (3)"),
    ],
)
def test_unknown_modes_are_refused_at_publish_naming_the_value(
    store_dir: Path, tmp_path: Path, scorer: str, named: str
) -> None:
    suite = tmp_path / "bad.yaml"
    suite.write_text(AGENT_SUITE.replace("- tool_errors: {max: 1}", f"- {scorer}"))
    result = CliRunner().invoke(app, ["suite", "publish", str(suite)])
    assert result.exit_code == 2, result.output
    assert f"{suite} line" in result.output and named in result.output
    assert "Traceback" not in result.output


def test_a_reference_check_on_a_case_without_expected_trajectory_is_refused() -> None:
    text = "suite: s\ncases:\n  - {id: a, input: q, scorers: [{trajectory_recall: 0.5}]}\n"
    with pytest.raises(InputError) as info:
        parse_suite(text, "s.yaml")
    assert info.value.field == "cases[0].expected_trajectory"
    assert "trajectory_recall needs" in info.value.problem


# --- the checks -----------------------------------------------------------------------------


def test_the_refund_agent_scored_from_messages() -> None:
    compiled = CompiledSuite.compile(parse_suite(AGENT_SUITE, "s.yaml"))
    output = record(case_id="refund-42", messages=refund_messages())
    (evidence,) = score_outputs(compiled, [output], HASHER)
    assert evidence.status is Status.PASS
    assert [c.status for c in evidence.checks] == [Status.PASS] * 3, evidence.label


def test_label_names_tools_and_the_first_mismatch_never_argument_values() -> None:
    reference = trail(("get_order", {"order_id": 42}), ("refund", {"order_id": 42}))
    agent = trail(("get_order", {"order_id": 42}), ("send_email", {"body": CANARY}))
    outcome = check({"trajectory": "in_order"}, agent, reference)
    assert outcome.status is Status.FAIL
    assert outcome.reason == "expected refund after get_order; got send_email"
    exact = check({"trajectory": "exact"}, agent, reference)
    assert exact.reason == "expected refund after get_order; got send_email"
    wrong_args = trail(("get_order", {"order_id": 42}), ("refund", {"order_id": CANARY}))
    outcome = check({"trajectory": "exact"}, wrong_args, reference)
    assert outcome.reason == "expected refund after get_order; got refund with other arguments"
    assert check({"trajectory": "any_order"}, wrong_args, reference).reason == (
        "missing refund (called with other arguments)"
    )
    twice = trail(("get_order", {"order_id": 42}), ("refund", {"order_id": 42}), ("refund", {}))
    assert check({"trajectory": "unordered"}, twice, reference).reason == "unexpected refund"
    for raw in ("exact", "in_order", "any_order", "unordered", "subset"):
        for agent_trail in (agent, wrong_args):
            assert CANARY not in check({"trajectory": raw}, agent_trail, reference).reason


def test_parallel_calls_never_match_sequential_ones_under_exact() -> None:
    together = trail([("a", {}), ("b", {})])
    apart = trail(("a", {}), ("b", {}))
    assert check({"trajectory": "exact"}, together, apart).status is Status.FAIL
    assert check({"trajectory": "exact"}, apart, together).status is Status.FAIL
    assert check({"trajectory": "exact"}, trail([("b", {}), ("a", {})]), together).status is (
        Status.PASS
    )
    # in_order lets calls made together match a reference in either order
    assert check({"trajectory": "in_order"}, together, apart).status is Status.PASS


def test_first_fit_would_wrongly_fail_where_the_assignment_matches() -> None:
    """`refund` with any arguments (superset of {}) and `refund {order_id: 1}`: first-fit gives
    the agent's first refund to the first reference call and then finds none for the second."""
    reference = trail(("refund", {}), ("refund", {"order_id": 1}))
    agent = trail([("refund", {"order_id": 1}), ("refund", {"order_id": 2})])
    for mode in ("any_order", "unordered", "in_order"):
        raw = {"trajectory": {"match": mode, "args": "superset"}}
        assert check(raw, agent, reference).status is Status.PASS, mode
    assert _first_fit_any_order(agent, reference) is False
    recall = check({"trajectory_recall": {"min": 1.0, "args": "superset"}}, agent, reference)
    assert (recall.status, recall.score) == (Status.PASS, 1.0)


def _first_fit_any_order(agent: Trajectory, reference: Trajectory) -> bool:
    free = list(agent.calls)
    for wanted in reference.calls:
        found = next(
            (c for c in free if c.tool == wanted.tool and wanted.args.items() <= c.args.items()),
            None,
        )
        if found is None:
            return False
        free.remove(found)
    return True


def test_rates_and_their_zero_denominators() -> None:
    reference = trail(("a", {}), ("b", {}))
    agent = trail(("a", {}), ("c", {}), ("d", {}))
    precision = check({"trajectory_precision": 0.5}, agent, reference)
    assert precision.status is Status.FAIL and precision.score == pytest.approx(1 / 3)
    assert precision.reason == "1/3 below 0.5"
    recall = check({"trajectory_recall": 0.5}, agent, reference)
    assert (recall.status, recall.score) == (Status.PASS, 0.5)
    none = check({"trajectory_precision": 0.0}, trail(), reference)
    assert none.status is Status.FAIL and "(0/0)" in none.reason
    assert check({"trajectory_recall": 0.0}, agent, trail()).status is Status.FAIL


def test_tool_counts_forbidden_tools_and_failed_calls() -> None:
    output = record(messages=refund_messages())
    agent = output.trajectory
    assert check({"tool_called": "refund"}, agent).status is Status.PASS
    assert check({"tool_called": {"tool": "refund", "max": 1}}, agent).reason == (
        "refund called 2 times (wanted 1)"
    )
    with_args = {"tool_called": {"tool": "get_order", "args": {"order_id": 7}}}
    assert check(with_args, agent).reason == "get_order called 0 times (wanted >= 1)"
    assert check({"tool_not_called": "delete_account"}, agent).status is Status.PASS
    forbidden = {"tool_not_called": {"tool": ["delete_account", "refund"]}}
    assert check(forbidden, agent).reason == "called refund"
    assert check({"max_tool_calls": 3}, agent).reason == "4 tool calls (max 3)"
    assert check({"tool_errors": {"max": 0}}, agent).reason == (
        "1 failed tool call (max 0): refund"
    )
    assert check("tool_errors", agent).status is Status.FAIL  # max defaults to 0


@pytest.mark.parametrize(
    "raw",
    [
        {"trajectory": "any_order"},
        {"tool_not_called": "delete_account"},
        {"max_tool_calls": 5},
        "tool_errors",
        {"tool_called": "refund"},
        {"trajectory_recall": 0.1},
    ],
)
def test_a_trajectory_check_on_an_output_without_one_fails_saying_so(raw: Any) -> None:
    outcome = check(raw, None, trail(("refund", {})))
    assert outcome.status is Status.FAIL
    assert "no tool calls recorded" in outcome.reason


def test_an_unusual_agent_tool_name_is_not_echoed() -> None:
    agent = trail((f"send {CANARY}\n", {}))
    outcome = check({"trajectory": "exact"}, agent, trail(("refund", {})))
    assert CANARY not in outcome.reason and "unusual name" in outcome.reason


def test_bad_arguments_json_exits_2_naming_the_line(store_dir: Path, tmp_path: Path) -> None:
    suite = tmp_path / "agent.yaml"
    suite.write_text(AGENT_SUITE)
    messages = refund_messages(secret=CANARY)
    messages[1]["tool_calls"][1]["function"]["arguments"] = '{"note": "' + CANARY
    outputs = tmp_path / "out.jsonl"
    outputs.write_text(json.dumps({"case_id": "refund-42", "messages": messages}) + "\n")
    result = CliRunner().invoke(app, ["run", str(suite), "--outputs", str(outputs)])
    assert result.exit_code == 2, result.output
    assert f"{outputs} line 1, field messages[1].tool_calls[1].function.arguments" in result.output
    assert CANARY not in result.output
    stored = [p for p in store_dir.rglob("*") if p.is_file()]
    assert not any("runs" in p.parts for p in stored)  # refused before any run started
    assert not any(CANARY.encode() in p.read_bytes() for p in stored)


# --- an independent implementation of the semantics, by brute force ------------------------

TOOLS = ("a", "b", "c")
ARGS: tuple[dict[str, Any], ...] = ({}, {"id": 1}, {"id": 2}, {"id": 1, "x": "y"}, {"x": "y"})
ARG_MODES: tuple[Any, ...] = ("exact", "ignore", "subset", "superset", ["id"])


def brute_args(mode: Any, agent: dict[str, Any], reference: dict[str, Any]) -> bool:
    if mode == "ignore":
        return True
    if mode == "exact":
        return agent == reference
    if mode == "subset":
        return set(agent.items()) <= set(reference.items())
    if mode == "superset":
        return set(agent.items()) >= set(reference.items())
    return all(agent.get(key, "∅") == reference.get(key, "∅") for key in mode)


Flat = list[tuple[int, ToolCall]]


def flat(trajectory: Trajectory) -> Flat:
    return [(k, c) for k, step in enumerate(trajectory.steps) for c in step]


def injections(n: int, m: int) -> list[tuple[int, ...]]:
    """Every one-to-one map of n items into m (as tuples of targets)."""
    return list(itertools.permutations(range(m), n))


def brute_match(
    mode: str, agent: Trajectory, reference: Trajectory, ok: Callable[[ToolCall, ToolCall], bool]
) -> bool:
    ours, theirs = flat(reference), flat(agent)
    if mode == "exact":
        if len(agent.steps) != len(reference.steps):
            return False
        return all(
            len(mine) == len(yours)
            and any(
                all(ok(y, m) for y, m in zip(order, mine, strict=True))
                for order in itertools.permutations(yours)
            )
            for mine, yours in zip(reference.steps, agent.steps, strict=True)
        )
    if mode == "subset":
        return any(
            all(ok(theirs[a][1], ours[r][1]) for a, r in enumerate(image))
            for image in injections(len(theirs), len(ours))
        )
    if mode == "unordered" and len(ours) != len(theirs):
        return False
    for image in injections(len(ours), len(theirs)):
        if not all(ok(theirs[a][1], ours[r][1]) for r, a in enumerate(image)):
            continue
        if mode != "in_order":
            return True
        if all(
            theirs[image[r]][0] <= theirs[image[s]][0]
            for r in range(len(ours))
            for s in range(len(ours))
            if ours[r][0] < ours[s][0]
        ):
            return True
    return False


def brute_matched(agent: Trajectory, reference: Trajectory, ok: Callable[..., bool]) -> int:
    ours, theirs = flat(reference), flat(agent)
    best = 0
    for size in range(min(len(ours), len(theirs)) + 1):
        for chosen in itertools.combinations(range(len(ours)), size):
            if any(
                all(ok(theirs[a][1], ours[r][1]) for r, a in zip(chosen, image, strict=True))
                for image in injections(size, len(theirs))
            ):
                best = size
                break
    return best


def random_trajectory(rng: random.Random, max_steps: int, max_calls: int) -> Trajectory:
    steps: list[tuple[ToolCall, ...]] = []
    budget = rng.randint(0, max_calls)
    while budget and len(steps) < max_steps:
        width = rng.randint(1, min(2, budget))
        budget -= width
        steps.append(
            tuple(ToolCall(rng.choice(TOOLS), dict(rng.choice(ARGS))) for _ in range(width))
        )
    return Trajectory(tuple(steps))


def test_the_checks_equal_a_brute_force_implementation_on_generated_cases() -> None:
    rng = random.Random(20261201)
    outcomes: dict[str, int] = {}
    for _ in range(1000):
        reference = random_trajectory(rng, 3, 4)
        agent = reference if rng.random() < 0.2 else random_trajectory(rng, 4, 5)
        mode = rng.choice(ARG_MODES)
        by_tool = {"b": rng.choice(ARG_MODES)} if rng.random() < 0.3 else {}

        def ok(a: ToolCall, r: ToolCall, mode: Any = mode, by_tool: Any = by_tool) -> bool:
            return a.tool == r.tool and brute_args(by_tool.get(r.tool, mode), a.args, r.args)

        options = (
            {"args": mode, "args_by_tool": by_tool}
            if not isinstance(mode, list)
            else {"args_by_tool": {tool: mode for tool in TOOLS}}
        )
        for match in ("exact", "in_order", "any_order", "unordered", "subset"):
            if isinstance(mode, list) and by_tool:
                continue
            outcome = check({"trajectory": {"match": match, **options}}, agent, reference)
            expected = brute_match(match, agent, reference, ok)
            assert (outcome.status is Status.PASS) is expected, (match, options, agent, reference)
            key = f"{match}:{'pass' if expected else 'fail'}"
            outcomes[key] = outcomes.get(key, 0) + 1
        if isinstance(mode, list) and by_tool:
            continue
        matched = brute_matched(agent, reference, ok)
        for name, total in (
            ("trajectory_precision", len(agent.calls)),
            ("trajectory_recall", len(reference.calls)),
        ):
            outcome = check({name: {"min": 0.5, **options}}, agent, reference)
            if total == 0:
                assert outcome.status is Status.FAIL
            else:
                assert outcome.score == pytest.approx(matched / total), (name, agent, reference)
                assert (outcome.status is Status.PASS) is (matched / total >= 0.5)
    # the generator reaches both verdicts of every mode
    assert all(
        outcomes.get(f"{m}:{v}", 0) >= 20
        for m in ("exact", "in_order", "any_order", "unordered", "subset")
        for v in ("pass", "fail")
    ), outcomes


def test_reference_trajectory_keeps_parallel_steps() -> None:
    suite = parse_suite(AGENT_SUITE, "s.yaml")
    steps = suite.cases[0].expected_trajectory
    assert steps is not None
    reference = reference_trajectory(steps)
    assert [[c.tool for c in step] for step in reference.steps] == [
        ["get_order", "get_user"],
        ["refund"],
    ]


def test_a_text_scorer_still_takes_plain_text() -> None:
    scorer = Scorer("t", "t", lambda text: Outcome(Status.PASS if text == "x" else Status.FAIL, 1))
    assert scorer("x").status is Status.PASS
    assert scorer(Observation("y")).status is Status.FAIL


# --- the same trajectories as messages and as OTLP traces -----------------------------------

MATCH_MODES = ("exact", "in_order", "any_order", "unordered", "subset")


def as_messages(trajectory: Trajectory, text: str) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    for k, step in enumerate(trajectory.steps):
        ids = [f"call-{k}-{j}" for j in range(len(step))]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call(c.tool, i, **c.args) for c, i in zip(step, ids, strict=True)],
            }
        )
        messages += [
            {"role": "tool", "tool_call_id": i, "content": "result", "is_error": c.failed}
            for c, i in zip(step, ids, strict=True)
        ]
    return [*messages, {"role": "assistant", "content": text}]


def as_expected(trajectory: Trajectory) -> list[Any]:
    return [
        [{"tool": c.tool, "args": c.args} for c in step]
        if len(step) > 1
        else {"tool": step[0].tool, "args": step[0].args}
        for step in trajectory.steps
    ]


def generated_agent_cases(count: int) -> tuple[str, list[dict[str, Any]], dict[str, bool]]:
    """A suite mixing every check over generated trajectories, its outputs as records of
    `case_id`, `text`, `trajectory`, and each case's verdict by the brute-force semantics."""
    rng = random.Random(7)
    cases, records, verdicts = [], [], {}
    for n in range(count):
        reference = random_trajectory(rng, 3, 4)
        agent = reference if rng.random() < 0.5 else random_trajectory(rng, 4, 5)
        agent = Trajectory(
            tuple(
                tuple(ToolCall(c.tool, c.args, failed=rng.random() < 0.1) for c in step)
                for step in agent.steps
            )
        )
        match, args = rng.choice(MATCH_MODES), rng.choice(("exact", "ignore", "superset"))
        limit = rng.randint(3, 6)
        needed = reference.calls[0].tool if reference.calls else "a"
        forbidden = "c" if rng.random() < 0.3 else "d"

        def ok(a: ToolCall, r: ToolCall, args: str = args) -> bool:
            return a.tool == r.tool and brute_args(args, a.args, r.args)

        matched = brute_matched(agent, reference, ok)
        calls, wanted = len(agent.calls), len(reference.calls)
        verdicts[f"case-{n}"] = (
            brute_match(match, agent, reference, ok)
            and bool(calls)
            and matched / calls >= 0.5
            and bool(wanted)
            and matched / wanted >= 0.5
            and any(c.tool == needed for c in agent.calls)
            and not any(c.tool == forbidden for c in agent.calls)
            and calls <= limit
            and sum(c.failed for c in agent.calls) <= 1
        )
        cases.append(
            {
                "id": f"case-{n}",
                "input": "q",
                "expected_trajectory": as_expected(reference),
                "scorers": [
                    {"trajectory": {"match": match, "args": args}},
                    {"trajectory_precision": {"min": 0.5, "args": args}},
                    {"trajectory_recall": {"min": 0.5, "args": args}},
                    {"tool_called": needed},
                    {"tool_not_called": [forbidden]},
                    {"max_tool_calls": limit},
                    {"tool_errors": {"max": 1}},
                    {"contains": f"answer {n}"},
                ],
            }
        )
        records.append({"case_id": f"case-{n}", "text": f"answer {n}", "trajectory": agent})
    return json.dumps({"suite": "agents", "cases": cases}), records, verdicts


def scored(suite_text: str, uri: str) -> dict[str, tuple[Status, list[Status]]]:
    from assay.outputs.index import index_outputs
    from assay.outputs.slices import read_slice

    suite = parse_suite(suite_text, "agents.json")
    ids = [case.id for case in suite.cases]
    index = index_outputs(uri, set(ids), ids, 7)
    assert index.missing == []
    outputs = [o for piece in index.slices for o in read_slice(piece, set(ids))]
    evidence = score_outputs(CompiledSuite.compile(suite), outputs, HASHER)
    return {e.case_id: (e.status, [c.status for c in e.checks]) for e in evidence}


@pytest.mark.parametrize(
    ("convention", "text_on"),
    [("genai", "chat"), ("openinference", "openinference"), ("genai", "langgraph")],
)
def test_messages_and_traces_of_the_same_trajectories_give_the_same_verdicts(
    tmp_path: Path, convention: str, text_on: str
) -> None:
    from tests.otel_agent import otlp_json, tool_agent_traces

    suite_text, records, verdicts = generated_agent_cases(60)
    jsonl = tmp_path / "agent.jsonl"
    jsonl.write_text(
        "".join(
            json.dumps(
                {"case_id": r["case_id"], "messages": as_messages(r["trajectory"], r["text"])}
            )
            + "\n"
            for r in records
        )
    )
    spans = tool_agent_traces(
        [
            {
                "case_id": r["case_id"],
                "text": r["text"],
                "steps": [[(c.tool, c.args, c.failed) for c in s] for s in r["trajectory"].steps],
            }
            for r in records
        ],
        convention=convention,
        text_on=text_on,
    )
    traces = tmp_path / "agent-traces.json"
    traces.write_text(otlp_json(spans))

    from_messages = scored(suite_text, str(jsonl))
    from_traces = scored(suite_text, str(traces))
    assert from_traces == from_messages
    assert {case: status is Status.PASS for case, (status, _) in from_messages.items()} == verdicts
    assert 5 <= sum(verdicts.values()) <= 55  # both verdicts occur


# --- reported with denominators; per-case results readable ----------------------------------


@pytest.mark.usefixtures("prefect_api")
def test_the_example_agent_run_reports_check_kinds_and_lists_failed_cases(
    store_dir: Path,
) -> None:
    from tests.conftest import EXAMPLES

    runner = CliRunner()
    result = runner.invoke(
        app,
        [
            "run",
            str(EXAMPLES / "agent-suite.yaml"),
            "--outputs",
            str(EXAMPLES / "outputs" / "agent-v1.jsonl"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    kinds = report["metrics"]["checks_by_kind"]
    assert kinds["trajectory"] == {"scored": 3, "passed": 3, "score_sum": 3.0}
    assert kinds["tool_not_called"]["passed"] == 2 and kinds["tool_not_called"]["scored"] == 3
    assert kinds["tool_errors"] == {"scored": 2, "passed": 1, "score_sum": 1.0}
    run_id = report["run_id"]

    shown = " ".join(runner.invoke(app, ["runs", "show", run_id]).output.split())  # unwrapped
    assert "check trajectory: 1.000 (3/3, 95% CI" in shown
    assert "check trajectory_precision: 1.000 (1/1, 95% CI" in shown
    assert "mean precision 1.000 (n=1)" in shown

    listed = runner.invoke(app, ["runs", "cases", run_id, "--status", "failed", "--json"])
    assert listed.exit_code == 0, listed.output
    cases = {case["case_id"]: case for case in json.loads(listed.stdout)}
    assert sorted(cases) == ["close-account-question", "refund-with-customer-check"]
    closing = cases["close-account-question"]
    assert closing["status"] == "fail" and closing["score"] == 0.0
    forbidden = next(c for c in closing["checks"] if c["kind"] == "tool_not_called")
    assert forbidden == {
        "scorer": "tool_not_called delete_account",
        "kind": "tool_not_called",
        "status": "fail",
        "score": 0.0,
        "label": "called delete_account",
    }
    failed_call = cases["refund-with-customer-check"]["checks"][-1]
    assert failed_call["label"] == "1 failed tool call (max 0): refund"

    table = runner.invoke(app, ["runs", "cases", run_id])
    assert table.exit_code == 0 and "two-orders-status" in table.output
    bad = runner.invoke(app, ["runs", "cases", run_id, "--status", "broken"])
    assert bad.exit_code == 2 and "--status must be one of" in bad.output
    missing = runner.invoke(app, ["runs", "cases", "no-such-run"])
    assert missing.exit_code == 2 and "no-such-run" in missing.output

    from assay.runs.scorecard import scorecard
    from assay.store import FileStore

    (row,) = scorecard(FileStore(store_dir), suite="refund-agent")
    assert "tool_errors 1/2 (0.095–0.905)" in row.latest_checks
    assert "trajectory 3/3 (0.439–1.000)" in row.latest_checks

    second = runner.invoke(
        app,
        [
            "run",
            str(EXAMPLES / "agent-suite.yaml"),
            "--outputs",
            str(EXAMPLES / "outputs" / "agent-v2.jsonl"),
            "--baseline",
            run_id,
        ],
    )
    assert second.exit_code == 0, second.output
    flat = " ".join(second.output.split())
    assert (
        "trajectories over 4 case(s): 1 newly failing (two-orders-status), 2 newly passing"
        " (close-account-question, refund-with-customer-check)"
    ) in flat


# --- a judged trajectory rubric -------------------------------------------------------------


@pytest.mark.usefixtures("prefect_api")
def test_a_judged_trajectory_rubric_sees_tool_names_and_redacted_arguments(
    judge_server: Any, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.judge_server import verdict

    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-test-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    judge_server.script(default=verdict("pass", 0.9))
    rubric = {"llm_judge": {"rubric": "Looks the order up before refunding.", "on": "trajectory"}}
    suite = tmp_path / "judged.json"
    suite.write_text(
        json.dumps(
            {
                "suite": "judged-tools",
                "cases": [
                    {"id": "with-tools", "input": "q", "scorers": [rubric]},
                    {"id": "text-only", "input": "q", "scorers": [rubric]},
                ],
            }
        )
    )
    secret = "jane.doe@example.com"
    messages = [
        {"role": "assistant", "tool_calls": [call("get_order", "c1", order_id=42)]},
        {"role": "assistant", "tool_calls": [call("send_email", "c2", to=secret)]},
        {"role": "tool", "tool_call_id": "c2", "content": "bounced", "is_error": True},
        {"role": "assistant", "content": f"Done. {CANARY}"},
    ]
    outputs = tmp_path / "judged.jsonl"
    outputs.write_text(
        json.dumps({"case_id": "with-tools", "messages": messages})
        + "\n"
        + json.dumps({"case_id": "text-only", "output": "no tools here"})
        + "\n"
    )
    result = CliRunner().invoke(app, ["run", str(suite), "--outputs", str(outputs), "--json"])
    assert result.exit_code == 0, result.output
    (request,) = judge_server.requests  # the output without a trajectory is not sent
    sent = request.text("user")
    assert 'step 1: get_order {"order_id": 42}' in sent
    assert "step 2: send_email" in sent and "[failed]" in sent
    assert secret not in sent  # redacted like any output text
    assert CANARY not in sent  # the final text is not what this rubric grades
    evidence = next(store_dir.rglob("runs/*/cases/000000.json")).read_text()
    chunk = json.loads(evidence)
    statuses = {case["case_id"]: case["status"] for case in chunk["cases"]}
    # An output with only text shows no calls: the trajectory rubric is unavailable, not failed
    assert statuses == {"with-tools": "pass", "text-only": "skipped"}
    assert "unavailable: a record with only `output` shows no tool calls" in evidence
    assert "on trajectory" in evidence  # the check's label says what it grades
