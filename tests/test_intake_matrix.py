"""Every record the real frameworks made gives the verdicts of the messages ground truth, or
`unavailable` exactly where the record could not show the evidence — a matrix, no silent
difference.

The recordings (`tests/frameworks`) are made by the real OpenAI Agents SDK (OpenInference and
OpenTelemetry GenAI instrumentations, content on and off), LangGraph's `create_react_agent`
(OpenInference), the raw `openai` client (`opentelemetry-instrumentation-openai-v2`: content in
span attributes, in log events, off) and the Anthropic SDK (its own tracing) against a scripted
model. The ground truth is each scenario's calls written as OpenAI Chat messages with every tool
result marked (`is_error`), built from the scenario itself, not from any recording.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.hashing import OutputHasher
from assay.intake.record import Evidence
from assay.outputs.index import index_outputs
from assay.outputs.slices import read_slice
from assay.runs.metrics import tally
from assay.runs.scoring import CompiledSuite, score_outputs
from assay.scorers import Status
from assay.suites.suite import Suite, parse_suite
from tests.frameworks.record import ALL_SETUPS
from tests.frameworks.scenarios import CANARY, EXPECTED

HASHER = OutputHasher(b"matrix")
TEXT, NAMES, ARGS, STATUS, PARALLEL = (
    Evidence.TEXT,
    Evidence.TOOL_NAMES,
    Evidence.TOOL_ARGUMENTS,
    Evidence.TOOL_STATUS,
    Evidence.PARALLEL,
)
EVERYTHING = frozenset({TEXT, NAMES, ARGS, STATUS, PARALLEL})

CHECKS: list[tuple[Any, frozenset[Evidence]]] = [
    ({"trajectory": {"match": "exact"}}, frozenset({NAMES, ARGS, PARALLEL})),
    ({"trajectory": {"match": "in_order", "args": "ignore"}}, frozenset({NAMES})),
    ({"trajectory_recall": {"min": 1.0}}, frozenset({NAMES, ARGS})),
    ({"tool_called": "lookup_order"}, frozenset({NAMES})),
    ({"tool_not_called": "delete_account"}, frozenset({NAMES})),
    ({"max_tool_calls": 1}, frozenset({NAMES})),
    ({"tool_errors": {"max": 0}}, frozenset({NAMES, STATUS})),
    ({"contains": "I refunded"}, frozenset({TEXT})),
]
"""Each check of every case, with the evidence it needs (stated here, not read from Assay)."""

UNSEEN: dict[tuple[str, str], frozenset[Evidence]] = {
    # OpenAI Responses items (the Agents SDK's to_input_list) cannot mark a failed call
    ("agents-openinference", "messages"): frozenset({STATUS}),
    ("agents-openinference", "traces"): frozenset(),
    ("agents-genai", "messages"): frozenset({STATUS}),
    ("agents-genai", "traces"): frozenset(),
    # content off: tool spans still name the calls and mark failures; no text, no arguments
    ("agents-genai-nocontent", "messages"): frozenset({STATUS}),
    ("agents-genai-nocontent", "traces"): frozenset({TEXT, ARGS}),
    # LangChain ToolMessages carry status "error"; TOOL spans carry status ERROR
    ("langgraph-openinference", "messages"): frozenset(),
    ("langgraph-openinference", "traces"): frozenset(),
    # Chat messages have no failure mark; openai-v2 records no tool spans to carry one
    ("openai-v2-attributes", "messages"): frozenset({STATUS}),
    ("openai-v2-attributes", "traces"): frozenset({STATUS}),
    ("openai-v2-events", "messages"): frozenset({STATUS}),
    ("openai-v2-events", "traces"): EVERYTHING,  # the content went to OTLP log records
    ("openai-v2-nocontent", "messages"): frozenset({STATUS}),
    ("openai-v2-nocontent", "traces"): EVERYTHING,
    # Anthropic's tool_result carries is_error; its own trace has no tool spans
    ("anthropic", "messages"): frozenset(),
    ("anthropic", "traces"): frozenset({STATUS}),
}
"""What each recording cannot show (for a case with calls)."""
UNSEEN_WITHOUT_CALLS: dict[tuple[str, str], frozenset[Evidence]] = {
    # no tool span and no captured model output: nothing tells zero calls from some
    ("agents-genai-nocontent", "traces"): EVERYTHING,
}
"""What a recording of a case with no calls cannot show, where it is not just its text."""


def suite() -> Suite:
    cases = []
    for case_id, expected in EXPECTED.items():
        # what the agent should have done: the wrong order and argument are the agent's errors
        reference = EXPECTED["correct" if case_id.startswith("wrong_") else case_id]
        steps = [
            [{"tool": c["name"], "args": c["arguments"]} for c in step]
            if len(step) > 1
            else {"tool": step[0]["name"], "args": step[0]["arguments"]}
            for step in reference["steps"]
        ]
        cases.append(
            {
                "id": case_id,
                "input": expected["prompt"],
                "expected_trajectory": steps,
                "scorers": [check for check, _ in CHECKS],
            }
        )
    return parse_suite(json.dumps({"suite": "frameworks", "cases": cases}), "frameworks.json")


def ground_truth(folder: Path) -> Path:
    """Each scenario as Chat messages with every tool result marked."""
    lines = []
    for case_id, expected in EXPECTED.items():
        messages: list[dict[str, Any]] = [{"role": "user", "content": expected["prompt"]}]
        for k, step in enumerate(expected["steps"]):
            ids = [f"c{k}-{j}" for j in range(len(step))]
            messages.append(
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": i,
                            "type": "function",
                            "function": {
                                "name": c["name"],
                                "arguments": json.dumps(c["arguments"]),
                            },
                        }
                        for c, i in zip(step, ids, strict=True)
                    ],
                }
            )
            messages += [
                {"role": "tool", "tool_call_id": i, "content": "r", "is_error": c["fails"]}
                for c, i in zip(step, ids, strict=True)
            ]
        messages.append({"role": "assistant", "content": expected["final_text"]})
        lines.append(json.dumps({"case_id": case_id, "messages": messages}))
    path = folder / "truth.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def verdicts(location: Path, evaluated: Suite) -> dict[str, list[tuple[Status, str]]]:
    ids = [case.id for case in evaluated.cases]
    index = index_outputs(str(location), set(ids), ids, 3)
    assert index.missing == []
    outputs = [o for piece in index.slices for o in read_slice(piece, set(ids))]
    evidence = score_outputs(CompiledSuite.compile(evaluated), outputs, HASHER)
    return {e.case_id: [(c.status, c.reason) for c in e.checks] for e in evidence}


@pytest.fixture(scope="module")
def truth(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[Status, str]]]:
    return verdicts(ground_truth(tmp_path_factory.mktemp("truth")), suite())


def test_the_ground_truth_has_the_verdicts_the_scenarios_were_written_for(
    truth: dict[str, list[tuple[Status, str]]],
) -> None:
    passed = {
        case: [status is Status.PASS for status, _ in checks] for case, checks in truth.items()
    }
    # exact, in_order, recall, lookup called, delete not called, <= 1 call, no errors, text
    assert passed == {
        "correct": [True, True, True, True, True, False, True, True],
        "wrong_order": [False, False, True, True, True, False, True, True],
        "wrong_argument": [False, True, False, True, True, False, True, True],
        "parallel": [True, True, True, True, True, False, True, False],
        "failing_tool": [True, True, True, True, True, True, False, False],
        "forbidden_tool": [True, True, True, False, False, True, True, False],
        "text_only": [True, True, False, False, True, True, True, False],
    }


@pytest.mark.parametrize("kind", ["messages", "traces"])
@pytest.mark.parametrize("setup", ALL_SETUPS)
def test_every_recording_gives_the_ground_truth_or_unavailable_where_it_cannot_show(
    framework_recordings: dict[str, Path],
    truth: dict[str, list[tuple[Status, str]]],
    setup: str,
    kind: str,
) -> None:
    folder = framework_recordings[setup]
    evaluated = suite()
    files = ["messages.jsonl"] if kind == "messages" else ["traces.json", "traces.pb"]
    got = {name: verdicts(folder / name, evaluated) for name in files}
    if kind == "traces":  # a protobuf trace file and its JSON twin read alike
        assert got["traces.json"] == got["traces.pb"]
    unseen = UNSEEN[(setup, kind)]
    found = got[files[0]]
    for case_id, checks in truth.items():
        # zero calls shown is evidence of zero; a record that shows no tool evidence at all
        # cannot tell zero from some
        if EXPECTED[case_id]["steps"] or NAMES in unseen:
            missing = unseen
        else:
            missing = UNSEEN_WITHOUT_CALLS.get((setup, kind), unseen & {TEXT})
        for (check, needs), (status, reason), (want, _) in zip(
            CHECKS, found[case_id], checks, strict=True
        ):
            where = f"{setup} {kind} {case_id} {check}"
            if needs & missing:
                assert status is Status.SKIPPED, where
                assert reason.startswith("unavailable: "), where
            else:
                assert status is want, f"{where}: {reason}"


def test_a_forbidden_call_the_trace_captured_fails_and_a_trace_without_tool_evidence_is_unavailable(
    framework_recordings: dict[str, Path],
) -> None:
    evaluated = suite()
    captured = verdicts(framework_recordings["openai-v2-attributes"] / "traces.json", evaluated)
    blind = verdicts(framework_recordings["openai-v2-nocontent"] / "traces.pb", evaluated)
    not_called = 4
    assert captured["forbidden_tool"][not_called] == (Status.FAIL, "called delete_account")
    assert blind["forbidden_tool"][not_called][0] is Status.SKIPPED
    assert blind["forbidden_tool"][not_called][1] == (
        "unavailable: the trace has no tool spans and no captured model output"
    )
    # every case incomplete: against coverage, never a pass
    ids = [case.id for case in evaluated.cases]
    index = index_outputs(
        str(framework_recordings["openai-v2-nocontent"] / "traces.pb"), set(ids), ids, 10
    )
    outputs = [o for piece in index.slices for o in read_slice(piece, set(ids))]
    metrics = tally(score_outputs(CompiledSuite.compile(evaluated), outputs, HASHER))
    assert (metrics.passed, metrics.incomplete, metrics.cases) == (0, 7, 7)
    assert (
        metrics.unavailable[
            "tool_not_called: the trace has no tool spans and no captured model output"
        ]
        == 7
    )


def test_usage_reaches_the_record_from_every_trace_convention(
    framework_recordings: dict[str, Path],
) -> None:
    evaluated = suite()
    ids = [case.id for case in evaluated.cases]
    for setup in ALL_SETUPS:
        path = framework_recordings[setup] / "traces.json"
        index = index_outputs(str(path), set(ids), ids, 10)
        for output in (o for piece in index.slices for o in read_slice(piece, set(ids))):
            turns = EXPECTED[output.case_id]["usage"]
            assert output.usage is not None, setup
            assert output.usage.input_tokens == sum(t[0] for t in turns), setup
            assert output.usage.output_tokens == sum(t[1] for t in turns), setup


def test_inspect_names_formats_calls_and_unavailable_checks_and_prints_no_canary(
    framework_recordings: dict[str, Path],
) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    folder = framework_recordings["agents-genai-nocontent"]
    suite_file = folder.parent / "frameworks-suite.json"
    suite_file.write_text(json.dumps(suite().document()))
    runner = CliRunner()
    for args in (["--json"], []):
        result = runner.invoke(
            app, ["outputs", "inspect", str(folder), "--suite", str(suite_file), *args]
        )
        assert result.exit_code == 0, result.output
        assert CANARY not in result.output
    shown = json.loads(
        runner.invoke(
            app,
            ["outputs", "inspect", str(folder / "traces.pb"), "--suite", str(suite_file), "--json"],
        ).stdout
    )
    (file,) = shown["files"]
    assert (file["format"], file["cases"]) == ("otlp", 7)
    parallel = next(case for case in shown["cases"] if case["case_id"] == "parallel")
    assert [(c["tool"], c["step"]) for c in parallel["calls"]] == [
        ("lookup_order", 1),
        ("send_email", 1),
    ]
    assert set(parallel["unseen"]) == {"text", "tool arguments", "usage"} - {"usage"}
    assert any(why.startswith("contains") for why in parallel["unavailable"])
