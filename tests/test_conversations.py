"""Conversation cases (docs/conversations.md): suites with turns, turn-by-turn scoring, the
verdict policies and the evidence each case keeps."""

from __future__ import annotations

import pytest

from assay.errors import InputError
from assay.hashing import OutputHasher
from assay.intake.record import AgentRecord, Exchange
from assay.outputs.candidate import CandidateOutput
from assay.runs.chunks import CaseVerdict
from assay.runs.scoring import CaseEvidence, CompiledSuite, score_missing, score_outputs
from assay.scorers import Status
from assay.suites.suite import load_published, parse_suite
from assay.trajectory import ToolCall, Trajectory

SUITE = """
suite: support
cases:
  - id: order-1
    input: Where is my order?
    scorers: [{max_turns: 4}]
    turns:
      - scorers: [{contains: order number}]
      - scorers: [{tool_called: get_order}, {contains: shipped}]
      - scorers: [{contains: A-1042}]
"""

HASHER = OutputHasher(b"test-key")


def conversation(*turns: tuple[str | None, list[str]], case_id: str = "order-1") -> CandidateOutput:
    """An output whose record is split into turns: (answer, tools called) each."""
    exchanges = tuple(
        Exchange(
            user="u", text=text, trajectory=Trajectory(tuple((ToolCall(t, {}),) for t in tools))
        )
        for text, tools in turns
    )
    steps = tuple(step for e in exchanges for step in e.trajectory.steps)
    record = AgentRecord(
        source="test", text=exchanges[-1].text, trajectory=Trajectory(steps), exchanges=exchanges
    )
    return CandidateOutput(case_id=case_id, output=exchanges[-1].text or "").with_record(record)


GOOD = (("your order number?", []), ("it shipped", ["get_order"]), ("A-1042 is on its way", []))


def scored(suite_text: str, output: CandidateOutput) -> CaseEvidence:
    return score_outputs(
        CompiledSuite.compile(parse_suite(suite_text, "s.yaml")), [output], HASHER
    )[0]


def test_every_turn_scored_against_its_turn_and_kept_as_verdicts_only() -> None:
    evidence = scored(SUITE, conversation(*GOOD))
    assert evidence.status is Status.PASS
    assert [t.status for t in evidence.turns or []] == [Status.PASS] * 3
    assert [t.turn for t in evidence.turns or []] == [1, 2, 3]
    assert [c.kind for c in evidence.checks] == ["max_turns"]
    dumped = evidence.model_dump_json()
    assert "on its way" not in dumped and "your order number" not in dumped


def test_first_failing_turn_names_the_case_and_a_short_record_fails_once() -> None:
    wrong = scored(SUITE, conversation(GOOD[0], ("it shipped", []), GOOD[2]))
    assert wrong.status is Status.FAIL
    assert wrong.label.startswith("turn 2 of 3: tool_called get_order")

    short = scored(SUITE, conversation(GOOD[0]))
    turns = short.turns or []
    assert short.status is Status.FAIL and short.label == "turn 2 of 3: no turn 2"
    assert (turns[1].status, turns[1].label, turns[1].missing) == (Status.FAIL, "no turn 2", True)
    assert (turns[2].status, turns[2].label) == (Status.SKIPPED, "unavailable: no turn 2")
    assert short.record_turns == 1


def test_extra_turns_are_counted_not_scored_and_max_turns_sees_them() -> None:
    extra = conversation(*GOOD, ("anything else?", []))
    evidence = scored(SUITE, extra)
    assert evidence.record_turns == 4 and len(evidence.turns or []) == 3
    assert evidence.status is Status.PASS and "1 extra turn not scored" in evidence.label
    five = scored(SUITE, conversation(*GOOD, ("more?", []), ("bye", [])))
    assert five.status is Status.FAIL and five.label == "max_turns 4: 5 turns > 4"


@pytest.mark.parametrize(
    ("policy", "status"),
    [
        ("all_turns", Status.FAIL),
        ("final_turn", Status.PASS),
        ("{mean_at_least: 0.8}", Status.PASS),  # (1 + 0.5 + 1) / 3 = 0.833
        ("{mean_at_least: 0.9}", Status.FAIL),
        ("{min_at_least: 0.5}", Status.PASS),
        ("{min_at_least: 0.6}", Status.FAIL),
    ],
)
def test_each_policy_decides_from_the_turns(policy: str, status: Status) -> None:
    text = SUITE.replace("    turns:", f"    conversation_passes: {policy}\n    turns:")
    evidence = scored(text, conversation(GOOD[0], ("it shipped", []), GOOD[2]))
    assert evidence.status is status, evidence.label


def test_a_missing_output_fails_its_first_turn_and_a_one_answer_case_keeps_its_bytes() -> None:
    compiled = CompiledSuite.compile(parse_suite(SUITE, "s.yaml"))
    (missing,) = score_missing(compiled, ["order-1"])
    assert missing.missing and [t.label for t in missing.turns or []] == [
        "no turn 1",
        "unavailable: no turn 1",
        "unavailable: no turn 1",
    ]
    one = "suite: s\ncases:\n  - id: a\n    input: q\n    scorers: [{contains: x}]\n"
    evidence = scored(one, CandidateOutput(case_id="a", output="x"))
    assert "turns" not in evidence.model_dump_json()
    assert CaseVerdict.model_validate_json(missing.model_dump_json()).turns is not None


def test_a_turns_judge_check_is_unavailable_not_passed() -> None:
    text = SUITE.replace("[{contains: A-1042}]", "[{llm_judge: remembers the order number}]")
    evidence = scored(text, conversation(*GOOD))
    last = (evidence.turns or [])[2]
    assert last.status is Status.SKIPPED and last.label.startswith("incomplete")
    assert evidence.status is Status.SKIPPED and evidence.label.startswith(
        "incomplete: turn 3 of 3"
    )


def test_turns_are_hashed_and_published_and_a_suite_without_them_keeps_its_address() -> None:
    one = "suite: s\ncases:\n  - id: a\n    input: q\n    scorers: [{contains: x}]\n"
    plain = parse_suite(one, "s.yaml")
    assert "turns" not in plain.canonical.text and "conversation_passes" not in plain.canonical.text
    # The address of this suite before turns existed (computed on the parent commit).
    assert plain.content_hash == PLAIN_ADDRESS
    suite = parse_suite(SUITE, "s.yaml")
    changed = parse_suite(SUITE.replace("A-1042", "A-1043"), "s.yaml")
    assert suite.content_hash != changed.content_hash
    policy = parse_suite(
        SUITE.replace("    turns:", "    conversation_passes: all_turns\n    turns:"), "s.yaml"
    )
    assert policy.content_hash == suite.content_hash  # the default written out: the same suite
    many = "suite: s\ncases:\n" + "".join(
        SUITE.split("cases:\n")[1].replace("order-1", f"order-{i}") for i in range(2500)
    )
    big = parse_suite(many, "s.yaml")
    data = big.canonical.text.encode()
    assert load_published(data, big.content_hash, "store") == big


PLAIN_ADDRESS = "sha256:22ca27e31b91bcbc5a3483b688dee8006bbd59c4702ae999ea926b8b89a390fb"


@pytest.mark.parametrize(
    ("turns", "field", "message"),
    [
        ("      - scorers: [{contans: x}]\n", "cases[0].turns[0].scorers[0]", "unknown scorer"),
        ("      - expected: a\n", "cases[0].turns[0].scorers", "turn 1 lists no scorers"),
        (
            "      - scorers: [{contains: a}]\n      - scorers: [trajectory]\n",
            "cases[0].turns[1].expected_trajectory",
            "needs the turn's expected_trajectory",
        ),
        (
            "      - scorers: [{contains: a}]\n        colour: red\n",
            "cases[0].turns[0].colour",
            "Extra",
        ),
    ],
)
def test_validation_names_the_turn_and_its_field(turns: str, field: str, message: str) -> None:
    text = f"suite: s\ncases:\n  - id: a\n    input: q\n    turns:\n{turns}"
    with pytest.raises(InputError) as raised:
        parse_suite(text, "s.yaml")
    assert raised.value.field == field and message in str(raised.value)


def test_a_policy_needs_turns() -> None:
    text = (
        "suite: s\ncases:\n  - id: a\n    input: q\n    scorers: [{contains: x}]\n"
        "    conversation_passes: final_turn\n"
    )
    with pytest.raises(InputError, match="conversation_passes needs the case's turns"):
        parse_suite(text, "s.yaml")
