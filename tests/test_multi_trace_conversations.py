"""A conversation recorded as several traces is read as one record (docs/records.md, "One
conversation, several traces"): the real OpenAI Agents SDK (OpenInference, `using_session`) and
LangGraph (OpenInference, a checkpointer's `thread_id`) record each user turn as its own trace
against the scripted model (`tests/frameworks/sessions.py`); the traces sharing a conversation id
are joined, turn per trace in time order, and a `turns` suite scores them turn by turn as the
framework's own message list is scored."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.errors import InputError
from assay.hashing import OutputHasher
from assay.intake.record import AgentRecord
from assay.outputs.candidate import CandidateOutput
from assay.outputs.index import index_outputs
from assay.outputs.reference import OutputsReference
from assay.outputs.slices import read_slice
from assay.runs.scoring import CompiledSuite, score_outputs
from assay.suites.suite import Suite, parse_suite
from tests.frameworks.scenarios import CANARY, CONVERSATIONS, usage_for
from tests.frameworks.sessions import SESSION_SETUPS

HASHER = OutputHasher(b"sessions")
CASE_ATTRIBUTE = {"agents-openinference": "assay.case_id", "langgraph-openinference": "session.id"}
"""How each recording names its cases (`SESSION_CASE_NOTES`): a span per turn, or the thread."""
TRACES = {"support": 3, "support_short": 2}
"""One trace per user turn."""


def _outputs(path: Path, setup: str) -> OutputsReference:
    return OutputsReference(location=str(path), case_attribute=CASE_ATTRIBUTE[setup])


def _read(reference: OutputsReference, chunk_size: int = 1) -> list[CandidateOutput]:
    """Every output behind `reference` through the run's own path: indexed, sliced, read."""
    index = index_outputs(reference, set(CONVERSATIONS), list(CONVERSATIONS), chunk_size)
    return [output for piece in index.slices for output in read_slice(piece, set(CONVERSATIONS))]


Turns = list[tuple[str, list[tuple[str, dict[str, Any]]], str | None]]
"""Per turn: the user's message, the calls with their arguments, the answer."""


def _ground_truth(name: str) -> Turns:
    """Each turn the script played: the user's message, the calls with arguments, the answer."""
    conversation = CONVERSATIONS[name]
    return [
        (request, [(call.name, dict(call.arguments)) for call in turn.calls], turn.final_text)
        for request, turn in zip(conversation.requests, conversation.turns, strict=True)
    ]


def _turns(record: AgentRecord) -> Turns:
    return [
        (turn.user, [(c.tool, dict(c.args)) for c in turn.trajectory.calls], turn.text)
        for turn in record.exchanges
    ]


@pytest.mark.parametrize("setup", SESSION_SETUPS)
@pytest.mark.parametrize("suffix", ["pb", "json"])
def test_the_traces_of_one_conversation_are_one_record_turn_per_trace(
    session_recordings: dict[str, Path], setup: str, suffix: str
) -> None:
    path = session_recordings[setup] / f"traces.{suffix}"
    outputs = {output.case_id: output for output in _read(_outputs(path, setup))}
    assert set(outputs) == set(CONVERSATIONS)
    for name, output in outputs.items():
        record = output.record
        assert record is not None
        assert _turns(record) == _ground_truth(name), (setup, name)
        assert record.text == CONVERSATIONS[name].turns[-1].final_text
        steps = [step for turn in record.exchanges for step in turn.trajectory.steps]
        assert record.trajectory.steps == tuple(steps)
        assert not record.unseen
        played = [
            usage_for(k) for turn in CONVERSATIONS[name].turns for k in range(len(turn.steps) + 1)
        ]
        assert (record.usage.input_tokens, record.usage.output_tokens) == (
            sum(figures[0] for figures in played),
            sum(figures[1] for figures in played),
        )


def _turns_suite(second_turn_calls: bool = True) -> Suite:
    """The scripted conversation turn by turn, for both recorded cases; with
    `second_turn_calls` False, turn 2 is expected to answer without calling a tool."""
    turns: list[dict[str, Any]] = []
    for turn in CONVERSATIONS["support"].turns:
        # the longest stretch without the canary: checks are named after it in the evidence
        checks: list[Any] = [{"contains": max(turn.final_text.split(CANARY), key=len).strip()}]
        if turn.calls and second_turn_calls:
            checks.append({"trajectory": {"match": "exact"}})
            turns.append(
                {
                    "scorers": checks,
                    "expected_trajectory": [
                        {"tool": call.name, "args": dict(call.arguments)} for call in turn.calls
                    ],
                }
            )
            continue
        turns.append({"scorers": [*checks, {"max_tool_calls": 0}]})
    cases = [{"id": name, "input": "conversation", "turns": turns} for name in CONVERSATIONS]
    return parse_suite(json.dumps({"suite": "sessions", "cases": cases}), "sessions.json")


def _verdicts(suite: Suite, outputs: list[CandidateOutput]) -> dict[str, Any]:
    evidence = score_outputs(CompiledSuite.compile(suite), outputs, HASHER)
    return {
        case.case_id: (
            case.status.value,
            [(turn.turn, turn.status.value) for turn in case.turns or []],
            case.label,
        )
        for case in evidence
    }


@pytest.mark.parametrize("setup", SESSION_SETUPS)
def test_a_turns_suite_scores_the_joined_traces_as_the_framework_s_own_messages(
    session_recordings: dict[str, Path], setup: str
) -> None:
    folder = session_recordings[setup]
    traced = _read(_outputs(folder / "traces.pb", setup))
    messages = _read(OutputsReference(location=str(folder / "messages.jsonl")))
    right, wrong = _turns_suite(), _turns_suite(second_turn_calls=False)
    verdicts = _verdicts(right, traced)
    assert verdicts == _verdicts(right, messages)
    assert verdicts["support"] == (
        "pass",
        [(1, "pass"), (2, "pass"), (3, "pass")],
        "3 of 3 turns passed",
    )
    assert verdicts["support_short"][:2] == ("fail", [(1, "pass"), (2, "pass"), (3, "fail")])
    assert verdicts["support_short"][2] == "turn 3 of 3: no turn 3"
    # held to other expectations, the joined record fails where the messages do: at turn 2
    failing = _verdicts(wrong, traced)
    assert failing == _verdicts(wrong, messages)
    assert failing["support"][1] == [(1, "pass"), (2, "fail"), (3, "pass")]
    assert failing["support"][2].startswith("turn 2 of 3: max_tool_calls")


@pytest.mark.usefixtures("prefect_api")
def test_a_run_scores_a_thread_s_traces_turn_by_turn_and_stores_none_of_their_text(
    session_recordings: dict[str, Path], store_dir: Path, tmp_path: Path
) -> None:
    from assay.runs.cases import case_results
    from assay.store import FileStore
    from tests.launched import suite_run

    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps(_turns_suite().document()))
    traces = session_recordings["langgraph-openinference"] / "traces.json"
    run = suite_run(
        suite=str(suite), outputs=_outputs(traces, "langgraph-openinference"), subject="agent:lg"
    )
    cases = {case.case_id: case for case in case_results(FileStore(store_dir), run.run_id)}
    assert [(t.turn, t.status.value) for t in cases["support"].turns or []] == [
        (1, "pass"),
        (2, "pass"),
        (3, "pass"),
    ]
    assert cases["support_short"].label == "turn 3 of 3: no turn 3"
    holding = [p for p in store_dir.rglob("*") if p.is_file() and CANARY.encode() in p.read_bytes()]
    assert [p.relative_to(store_dir).parts[:2] for p in holding] == [("suites", "sessions")]


def test_turns_follow_time_not_file_order_across_files(
    session_recordings: dict[str, Path], tmp_path: Path
) -> None:
    lines = (session_recordings["agents-openinference"] / "traces.json").read_text().splitlines()
    folder = tmp_path / "split"
    folder.mkdir()
    reversed_lines = lines[::-1]
    (folder / "a.json").write_text("\n".join(reversed_lines[::2]) + "\n")
    (folder / "b.json").write_text("\n".join(reversed_lines[1::2]) + "\n")
    outputs = _read(_outputs(folder, "agents-openinference"), chunk_size=2)
    records = {output.case_id: output.record for output in outputs}
    for name, record in records.items():
        assert record is not None
        assert _turns(record) == _ground_truth(name)


def test_inspect_says_how_many_traces_each_conversation_was_joined_from(
    session_recordings: dict[str, Path],
) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    path = session_recordings["langgraph-openinference"] / "traces.pb"
    runner = CliRunner()
    command = ["outputs", "inspect", str(path), "--case-attribute", "session.id"]
    shown = json.loads(runner.invoke(app, [*command, "--json"]).stdout)
    assert {case["case_id"]: (case["traces"], case["joined_by"]) for case in shown["cases"]} == {
        name: (n, "session.id") for name, n in TRACES.items()
    }
    table = runner.invoke(app, command)
    assert table.exit_code == 0, table.output
    read_as = [row.split("│")[2].strip() for row in table.output.splitlines() if "│" in row]
    assert " ".join(read_as) == "otlp, 3 traces by session.id otlp, 2 traces by session.id"


# --- hand-built exports: which traces join, and the errors ----------------------------------


def _turn_trace(
    number: int, start_s: int, attributes: dict[str, str], users: list[str]
) -> dict[str, Any]:
    """One OTLP/JSON document: one trace of one user turn, a root span with `attributes` and a
    GenAI chat span below it whose input holds the conversation so far."""

    def attribute_list(values: dict[str, str]) -> list[dict[str, Any]]:
        return [{"key": k, "value": {"stringValue": v}} for k, v in values.items()]

    trace_id = f"{number:032x}"
    said = [{"role": "user", "parts": [{"type": "text", "content": u}]} for u in users]
    answer = [{"role": "assistant", "parts": [{"type": "text", "content": f"answer {number}"}]}]
    spans = [
        {
            "traceId": trace_id,
            "spanId": f"{number:08x}00000001",
            "name": "turn",
            "startTimeUnixNano": str(start_s * 10**9),
            "endTimeUnixNano": str((start_s + 1) * 10**9),
            "attributes": attribute_list(attributes),
        },
        {
            "traceId": trace_id,
            "spanId": f"{number:08x}00000002",
            "parentSpanId": f"{number:08x}00000001",
            "name": "chat",
            "startTimeUnixNano": str(start_s * 10**9 + 1),
            "endTimeUnixNano": str((start_s + 1) * 10**9 - 1),
            "attributes": attribute_list(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.input.messages": json.dumps(said),
                    "gen_ai.output.messages": json.dumps(answer),
                }
            ),
        },
    ]
    return {"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": spans}]}]}


def _export(path: Path, *traces: dict[str, Any]) -> OutputsReference:
    path.write_text("".join(json.dumps(trace) + "\n" for trace in traces))
    return OutputsReference(location=str(path))


def _index(reference: OutputsReference) -> list[CandidateOutput]:
    index = index_outputs(reference, {"a", "b"}, ["a", "b"], 10)
    return [output for piece in index.slices for output in read_slice(piece, {"a", "b"})]


def test_a_gen_ai_conversation_id_joins_traces_only_one_of_which_names_the_case(
    tmp_path: Path,
) -> None:
    conversation = {"gen_ai.conversation.id": "conv-1"}
    reference = _export(
        tmp_path / "traces.json",
        _turn_trace(2, 20, conversation, ["hi", "and then?"]),
        _turn_trace(1, 10, {**conversation, "assay.case_id": "a"}, ["hi"]),
        _turn_trace(3, 30, {"assay.case_id": "b"}, ["alone"]),
    )
    outputs = {output.case_id: output.record for output in _index(reference)}
    joined, alone = outputs["a"], outputs["b"]
    assert joined is not None and alone is not None
    assert [(turn.user, turn.text) for turn in joined.exchanges] == [
        ("hi", "answer 1"),
        ("and then?", "answer 2"),
    ]
    assert joined.text == "answer 2"
    assert [(turn.user, turn.text) for turn in alone.exchanges] == [("alone", "answer 3")]


def test_a_conversation_naming_two_cases_is_a_one_line_error_naming_both(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    reference = _export(
        tmp_path / "traces.json",
        _turn_trace(1, 10, {"session.id": "s-1", "assay.case_id": "a"}, ["hi"]),
        _turn_trace(2, 20, {"session.id": "s-1", "assay.case_id": "b"}, ["hi", "more"]),
    )
    with pytest.raises(InputError) as raised:
        _index(reference)
    assert raised.value.line == 2
    assert raised.value.problem == (
        "conversation 's-1' (session.id, 2 trace(s)) names two cases, 'a' and 'b' (first at "
        f"{tmp_path / 'traces.json'} line 1)"
    )
    result = CliRunner().invoke(app, ["outputs", "inspect", str(tmp_path / "traces.json")])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert "'a' and 'b'" in result.output


def test_what_joining_leaves_an_error(tmp_path: Path) -> None:
    nameless = _export(
        tmp_path / "nameless.json",
        _turn_trace(1, 10, {"session.id": "s-1"}, ["hi"]),
        _turn_trace(2, 20, {"session.id": "s-1"}, ["hi", "more"]),
    )
    with pytest.raises(InputError, match=r"conversation 's-1' \(session\.id, 2 trace\(s\)\): no "):
        _index(nameless)
    # without a conversation id, a second trace of one case is still a duplicate
    twice = _export(
        tmp_path / "twice.json",
        _turn_trace(1, 10, {"assay.case_id": "a"}, ["hi"]),
        _turn_trace(2, 20, {"assay.case_id": "a"}, ["hi", "more"]),
    )
    with pytest.raises(InputError, match="duplicate output for case 'a'"):
        _index(twice)
    # and two conversations of one case too
    two = _export(
        tmp_path / "two.json",
        _turn_trace(1, 10, {"session.id": "s-1", "assay.case_id": "a"}, ["hi"]),
        _turn_trace(2, 20, {"session.id": "s-2", "assay.case_id": "a"}, ["hi"]),
    )
    with pytest.raises(InputError, match="duplicate output for case 'a'"):
        _index(two)
