"""A recorded conversation splits into the same turns whatever recorded it (docs/records.md,
"Turns"): the real `openai` client's Chat Completions message list and its openai-v2 OTLP traces,
the real OpenAI Agents SDK's Responses items and its OpenInference traces (one `Runner.run` per
user turn), all against the scripted model (`tests/frameworks/converse.py`).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from assay.intake import messages, transcripts
from assay.intake.otlp.index import TraceBook, read_documents
from assay.intake.record import AgentRecord
from assay.outputs.sources import OutputSource
from tests.frameworks.converse import CONVERSATION_SETUPS
from tests.frameworks.scenarios import CONVERSATIONS

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
Split = list[tuple[list[str], str | None]]


def _split(record: AgentRecord) -> Split:
    return [([c.tool for c in e.trajectory.calls], e.text) for e in record.exchanges]


def _expected(name: str) -> Split:
    return [
        ([call.name for call in turn.calls], turn.final_text) for turn in CONVERSATIONS[name].turns
    ]


def _recorded(folder: Path) -> dict[str, dict[str, AgentRecord]]:
    """Each recording of the folder (messages, OTLP protobuf, OTLP JSON): case -> record."""
    found: dict[str, dict[str, AgentRecord]] = {"messages": {}}
    for line in (folder / "messages.jsonl").read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        found["messages"][entry["case_id"]] = messages.read(entry["messages"])
    for suffix in ("pb", "json"):
        book = TraceBook("assay.case_id", keep_spans=True)
        read_documents(book, OutputSource(str(folder / f"traces.{suffix}")), None)
        found[suffix] = {c.case_id: c.read() for c in book.conversations()}
    return found


@pytest.mark.parametrize("setup", CONVERSATION_SETUPS)
def test_every_recording_of_a_conversation_splits_into_its_turns(
    conversation_recordings: dict[str, Path], setup: str
) -> None:
    for recording, records in _recorded(conversation_recordings[setup]).items():
        assert set(records) == set(CONVERSATIONS), recording
        for name, record in records.items():
            assert _split(record) == _expected(name), (recording, name)
            assert [e.user for e in record.exchanges] == CONVERSATIONS[name].requests
            assert record.exchanges[-1].text == record.text
            steps = [step for e in record.exchanges for step in e.trajectory.steps]
            assert tuple(steps) == record.trajectory.steps
            assert record.conversation() == record.exchanges


def test_a_recording_with_fewer_turns_has_fewer_exchanges(
    conversation_recordings: dict[str, Path],
) -> None:
    for setup in CONVERSATION_SETUPS:
        for recording, records in _recorded(conversation_recordings[setup]).items():
            full, short = records["support"].exchanges, records["support_short"].exchanges
            assert (len(full), len(short)) == (3, 2), (setup, recording)
            assert [e.text for e in short] == [e.text for e in full[:2]]


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*/*.json*")), ids=lambda p: p.stem)
def test_a_one_question_transcript_is_one_turn_holding_the_whole_record(path: Path) -> None:
    fmt = transcripts.detect(path.read_bytes()[: transcripts.HEAD_BYTES])
    assert fmt is not None
    record = transcripts.READERS[fmt].read(path.read_bytes(), str(path))
    assert len(record.exchanges) == 1
    (only,) = record.exchanges
    assert (only.text, only.trajectory) == (record.text, record.trajectory)
    assert only.user == next(turn.text for turn in record.turns if turn.role == "user")
