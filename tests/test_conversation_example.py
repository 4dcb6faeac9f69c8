"""Conversations end to end (docs/conversations.md): the example suite on its two agent versions'
recorded outputs, and the same conversation recorded by the real `openai` client as a message
list and as openai-v2 OTLP traces giving the same turn verdicts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from assay.runs.cases import case_results
from assay.store import FileStore
from tests.conftest import EXAMPLES
from tests.frameworks.scenarios import CONVERSATIONS
from tests.launched import suite_run

pytestmark = pytest.mark.usefixtures("prefect_api")


def _turns(store: FileStore, run_id: str) -> dict[str, tuple[str, list[tuple[int, str]], str]]:
    """Each case's verdict, its turns' verdicts and its label."""
    return {
        case.case_id: (
            case.status.value,
            [(t.turn, t.status) for t in case.turns or []],
            case.label,
        )
        for case in case_results(store, run_id)
    }


def test_the_example_conversations_name_their_first_failing_turn(store_dir: Path) -> None:
    store = FileStore(store_dir)
    suite = str(EXAMPLES / "conversation-suite.yaml")
    v1 = suite_run(
        suite=suite, outputs=str(EXAMPLES / "outputs/conversation-v1.jsonl"), subject="agent:s@v1"
    )
    v2 = suite_run(
        suite=suite, outputs=str(EXAMPLES / "outputs/conversation-v2.jsonl"), subject="agent:s@v2"
    )
    assert (v1.metrics.passed, v2.metrics.passed, v2.metrics.cases) == (5, 1, 6)
    cases = _turns(store, v2.run_id)
    assert cases["order-status-1"][:2] == ("pass", [(1, "pass"), (2, "pass"), (3, "pass")])
    assert cases["order-status-2"][2].startswith("turn 2 of 3: trajectory")  # no get_order
    assert cases["order-status-3"][2].startswith('turn 3 of 3: contains "A-1043"')  # forgot it
    assert cases["order-status-6"][2] == "turn 3 of 3: no turn 3"  # the record has two turns


def _suite_of_the_recorded_conversations(path: Path) -> Path:
    """A suite holding the scripted conversation turn by turn (the calls of each turn, in order
    and with their arguments, and its answer), for both recorded cases: `support_short`'s
    record stops after turn 2."""
    turns: list[dict[str, Any]] = []
    for turn in CONVERSATIONS["support"].turns:
        spec: dict[str, Any] = {"scorers": [{"contains": turn.final_text.split(" (")[0][:30]}]}
        if turn.calls:
            spec["expected_trajectory"] = [
                {"tool": call.name, "args": dict(call.arguments)} for call in turn.calls
            ]
            spec["scorers"].append({"trajectory": {"match": "in_order"}})
        turns.append(spec)
    cases = [{"id": name, "input": "conversation", "turns": turns} for name in CONVERSATIONS]
    path.write_text(json.dumps({"suite": "recorded-conversations", "cases": cases}))
    return path


def test_messages_and_otlp_recordings_of_a_conversation_get_the_same_turn_verdicts(
    conversation_recordings: dict[str, Path], store_dir: Path, tmp_path: Path
) -> None:
    store = FileStore(store_dir)
    suite = str(_suite_of_the_recorded_conversations(tmp_path / "suite.json"))
    folder = conversation_recordings["openai-v2-attributes"]
    verdicts = {
        form: _turns(
            store,
            suite_run(suite=suite, outputs=str(folder / name), subject=f"agent:rec@{form}").run_id,
        )
        for form, name in (("messages", "messages.jsonl"), ("otlp", "traces.json"))
    }
    assert verdicts["messages"] == verdicts["otlp"]
    assert verdicts["messages"]["support"][:2] == ("pass", [(1, "pass"), (2, "pass"), (3, "pass")])
    assert verdicts["messages"]["support_short"][2] == "turn 3 of 3: no turn 3"
