"""Where a conversation shows (docs/conversations.md): `assay runs cases` (the turn column,
`--turns`, `--json`), `GET /runs/{id}/cases` and the client, the SSE case frames, JUnit, the
pull-request comment, the scorecard and the HTML report (the per-turn strip and the turn-index
chart, in headless Chromium) — on the example conversation suite, run for two agent versions
recorded as OpenAI messages with a canary in every turn's text and tool arguments, which no view
shows and no stored file holds."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import junitparser
import pytest
from httpx_sse import connect_sse
from typer.testing import CliRunner

from assay.cli import app
from assay.client import AssayClient
from assay.gate.decision import load_decision
from assay.gate.junit import junit_xml
from assay.reports.run import run_page
from assay.reports.run_view import RunView
from assay.runs.metrics import tally
from assay.runs.records import load_result
from assay.runs.scorecard import conversations_text, scorecard
from assay.runs.scoring import CaseEvidence, TurnVerdict
from assay.scorers import Status
from assay.store import FileStore
from tests.api_service import start_service
from tests.browser import render, require_chromium

SUITE = Path(__file__).resolve().parent.parent / "examples" / "conversation-suite.yaml"
CANARY = "CANARYTURNSQZXW"
"""Letters only: a `contains` check reads the same answer with or without it."""

GOOD = ("order number", "shipped", "on its way")
"""What a good agent answers in turns 1–3 (the third also names the order)."""
V2: dict[int, str] = {4: "no get_order", 5: "short", 6: "forgets"}
"""How v2 goes wrong in some conversations (v1 holds every one well)."""

pytestmark = pytest.mark.usefixtures("prefect_api")


def _called(ident: str, tool: str, arguments: dict[str, str]) -> list[dict[str, Any]]:
    """An assistant's call and the tool's answer, the canary in the answer."""
    call = {
        "id": ident,
        "type": "function",
        "function": {"name": tool, "arguments": json.dumps(arguments)},
    }
    return [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": ident, "content": f"found {CANARY}"},
    ]


def _messages(number: int, fault: str | None) -> list[dict[str, Any]]:
    """Conversation `number` as OpenAI Chat messages, the canary in every text and in the
    arguments of turn 1's call (turn 2's `get_order` must carry just the order number)."""
    order = f"A-104{number}"
    turn2: list[dict[str, Any]] = [{"role": "user", "content": f"It is {order} {CANARY}"}]
    if fault != "no get_order":
        turn2 += _called(f"o{number}", "get_order", {"order_id": order})
    turn2.append({"role": "assistant", "content": f"It {GOOD[1]} yesterday. {CANARY}"})
    remembered = "your order" if fault == "forgets" else order
    turn3 = [
        {"role": "user", "content": f"Which order was that again? {CANARY}"},
        {"role": "assistant", "content": f"{remembered} is {GOOD[2]}. {CANARY}"},
    ]
    messages = [
        {"role": "user", "content": f"Hi, I need help with an order. {CANARY}"},
        *_called(f"u{number}", "find_customer", {"said": f"help with an order {CANARY}"}),
        {"role": "assistant", "content": f"What is your {GOOD[0]}? {CANARY}"},
        *turn2,
    ]
    if fault != "short":
        messages += turn3
    if fault == "forgets":  # and talks on: a fourth turn the case does not score
        messages += [
            {"role": "user", "content": f"Thanks {CANARY}"},
            {"role": "assistant", "content": f"Bye {CANARY}"},
        ]
    return messages


def _outputs(folder: Path, version: str) -> str:
    faults = V2 if version == "v2" else {}
    lines = [
        json.dumps({"case_id": f"order-status-{n}", "messages": _messages(n, faults.get(n))})
        for n in range(1, 7)
    ]
    path = folder / f"conversations-{version}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _cli(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    assert result.exit_code == code, result.output
    return result.stdout


@dataclass
class Runs:
    root: Path
    store: str
    v1: str
    v2: str
    junit: Path
    comment: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """v1 run, then v2 gated against it with `--junit` and `--comment`, as a CI job does."""
    root = tmp_path_factory.mktemp("conversations")
    store = f"file://{root / 'store'}"
    common = ("--store", store, "--local", "--json")
    first = _cli(
        "run",
        str(SUITE),
        "--outputs",
        _outputs(root, "v1"),
        "--subject",
        "agent:support@v1",
        *common,
    )
    v1 = json.loads(first)["run_id"]
    junit, comment = root / "junit.xml", root / "comment.md"
    gated = _cli(
        "gate", str(SUITE), "--outputs", _outputs(root, "v2"), "--subject", "agent:support@v2",
        "--baseline", v1, "--junit", str(junit), "--comment", str(comment), *common,
        code=1,  # 3/6 conversations pass: below the suite's 0.8
    )  # fmt: skip
    v2 = json.loads(gated)["result"]["run_id"]
    return Runs(root, store, v1, v2, junit, comment)


def test_runs_cases_shows_the_first_failing_turn_and_lists_turns_on_request(runs: Runs) -> None:
    table = _cli("runs", "cases", runs.v2, "--store", runs.store, "--local")
    rows = {
        found.group(0): line
        for line in table.splitlines()
        if (found := re.search(r"order-status-\d", line))
    }
    assert "3/3 passed" in rows["order-status-1"]
    assert "2/3 failed" in rows["order-status-4"] and "turn 2 of 3" in rows["order-status-4"]
    assert "3/3 missing" in rows["order-status-5"]
    assert "3/3 failed +1 extra" in rows["order-status-6"]
    assert "turn 1" not in table
    listed = _cli(
        "runs", "cases", runs.v2, "--turns", "--status", "failed", "--store", runs.store, "--local"
    )
    turns = re.findall(r"turn (\d)\W+(pass|fail|skipped|error)\b", listed)
    # order-status-4, -5 and -6, three turns each, in order.
    assert turns == [
        ("1", "pass"), ("2", "fail"), ("3", "pass"),
        ("1", "pass"), ("2", "pass"), ("3", "fail"),
        ("1", "pass"), ("2", "pass"), ("3", "fail"),
    ]  # fmt: skip
    assert "no turn 3" in listed
    cases = json.loads(_cli("runs", "cases", runs.v2, "--json", "--store", runs.store, "--local"))
    short = next(c for c in cases if c["case_id"] == "order-status-5")
    assert short["record_turns"] == 2
    assert [(t["turn"], t["status"], t["missing"]) for t in short["turns"]] == [
        (1, "pass", False),
        (2, "pass", False),
        (3, "fail", True),
    ]
    assert short["turns"][1]["checks"][0]["kind"] == "trajectory"
    assert CANARY not in table + listed + json.dumps(cases)


def test_the_service_the_client_and_the_event_stream_carry_turn_verdicts(
    runs: Runs, prefect_api: str
) -> None:
    service = start_service(runs.root, prefect_api_url=prefect_api)
    try:
        with service.client("viewer") as client:
            page = client.get(f"/runs/{runs.v2}/cases", params={"status": "failed"})
            with connect_sse(client, "GET", f"/runs/{runs.v2}/events") as source:
                events = list(source.iter_sse())
        listed = AssayClient(service.url, service.tokens["viewer"]).cases(runs.v2, "failed")
    finally:
        service.stop()
    assert page.status_code == 200, page.text
    items = page.json()["items"]
    assert [i["case_id"] for i in items] == [f"order-status-{n}" for n in (4, 5, 6)]
    assert [t["status"] for t in items[0]["turns"]] == ["pass", "fail", "pass"]
    assert items[2]["record_turns"] == 4
    assert [c.turns_text() for c in listed] == ["2/3 failed", "3/3 missing", "3/3 failed +1 extra"]
    assert listed[1].turns is not None and listed[1].turns[2].label == "no turn 3"
    frames = {e.json()["case_id"]: e.json() for e in events if e.event == "case"}
    assert len(frames) == 6
    short = frames["order-status-5"]
    assert short["turns"][2] == {"turn": 3, "status": "fail", "score": 0.0, "label": "no turn 3",
                                 "missing": True}  # fmt: skip
    assert short["record_turns"] == 2 and "checks" not in short["turns"][0]
    assert CANARY not in page.text + "".join(e.data for e in events)


def test_junit_has_one_test_case_per_conversation_with_its_failing_turns(runs: Runs) -> None:
    xml = runs.junit.read_text()
    suite = next(s for s in junitparser.JUnitXml.fromfile(str(runs.junit)) if "·" in s.name)
    cases = {case.name: case for case in suite}
    assert sorted(cases) == [f"order-status-{n}" for n in range(1, 7)]
    assert suite.tests == 6 and suite.failures == 3
    failure = cases["order-status-4"].result[0]
    assert failure.message.startswith("turn 2 of 3: ")
    assert failure.text.splitlines()[1].startswith("turn 2 of 3: fail — ")
    missing = cases["order-status-5"].result[0]
    assert "turn 3 of 3: missing — no turn 3" in missing.text
    assert not cases["order-status-1"].result
    assert CANARY not in xml


def test_comment_and_scorecard_count_conversations_and_turns(runs: Runs) -> None:
    comment = runs.comment.read_text()
    # Turn 1: 6/6; turn 2: v2's order-status-4 skips get_order; turn 3: -5 lacks it, -6 forgets.
    line = "conversations 3/6 passed; turns 15/18 (turn 1 6/6, turn 2 5/6, turn 3 4/6)"
    assert f"Head: {line}." in comment
    assert CANARY not in comment
    rows = {row.subject: row for row in scorecard(FileStore(runs.root / "store"))}
    assert rows["agent:support@v2"].latest_conversations == line
    assert rows["agent:support@v1"].latest_conversations.startswith("conversations 6/6 passed")


def test_the_report_shows_the_turn_strip_and_the_turn_index_chart(
    runs: Runs, tmp_path: Path
) -> None:
    require_chromium()
    page = tmp_path / "report.html"
    _cli("report", runs.v2, "--against", runs.v1, "-o", str(page), "--store", runs.store, "--local")
    rendered = render(page)
    assert rendered.console == []
    dom = rendered.dom
    assert re.search(r'<svg\b[^>]*aria-label="Pass rate by turn index"', dom)
    assert 'id="index-points"' in dom
    assert "turn 2: 0.833 (5/6" in dom  # the figures beside the chart, as text
    strips = re.findall(
        r'<tr data-case-id="([^"]+)".*?<span class="strip" aria-label="turns">(.*?)</span>', dom
    )
    assert len(strips) == 6
    cells = {case: re.findall(r'<b class="t ([a-z ]+)" title="([^"]+)">', strip)
             for case, strip in strips}  # fmt: skip
    assert [c[0] for c in cells["order-status-1"]] == ["pass"] * 3
    assert cells["order-status-5"][2] == ("fail missing", "turn 3 of 3: missing: no turn 3")
    assert cells["order-status-4"][1][1].startswith("turn 2 of 3: fail: ")
    assert "+1 extra not scored" in dom
    assert CANARY not in page.read_text()


def test_the_canary_is_in_no_stored_file(runs: Runs) -> None:
    """Nor in any other file the runs, the gate and the service wrote (JUnit, the comment, the
    service's log): only the outputs hold it."""
    written = [p for p in runs.root.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".html") for p in written)  # the reports the runs stored
    holding = [p.name for p in written if CANARY.encode() in p.read_bytes()]
    assert sorted(holding) == ["conversations-v1.jsonl", "conversations-v2.jsonl"]


def _conversation(case_id: str, statuses: list[Status]) -> CaseEvidence:
    turns = [
        TurnVerdict(turn=j + 1, status=s, score=float(s is Status.PASS), label=f"check {j + 1}")
        for j, s in enumerate(statuses)
    ]
    passed = all(s is Status.PASS for s in statuses)
    first = next((t for t in turns if t.status is not Status.PASS), None)
    return CaseEvidence(
        case_id=case_id,
        status=Status.PASS if passed else Status.FAIL,
        score=1.0 if passed else 0.0,
        output_hmac=None,
        label="all passed" if first is None else f"turn {first.turn} of {len(turns)}: x",
        checks=[],
        turns=turns,
    )


def test_several_failing_turns_are_named_and_long_conversations_stay_bounded(runs: Runs) -> None:
    ok, no = Status.PASS, Status.FAIL
    cases = [_conversation("a", [ok, no, no]), _conversation("b", [ok] * 14 + [no])]
    store = FileStore(runs.root / "store")
    xml = junit_xml(load_decision(store, runs.v2), cases)
    suite = next(iter(junitparser.JUnitXml.fromstring(xml)))
    messages = {case.name: case.result[0].message for case in suite}
    assert messages["a"] == "turn 2 of 3: x (failing turns 2, 3 of 3)"
    assert messages["b"] == "turn 15 of 15: x"  # one failing turn: the label names it
    recorded = load_result(store, runs.v2)
    result = recorded.model_copy(update={"metrics": tally(cases), "regression": None})
    line = conversations_text(result)
    assert line.startswith("conversations 0/2 passed; turns 15/18 (turn 1 2/2, turn 2 1/2")
    assert line.endswith("turn 10 1/1, … 5 more)")
    report = run_page(RunView(result=result, rows=cases, cases=2, info={}))
    strip = re.findall(r'<b class="t (\w+)" title="([^"]+)">(\d+)(.)</b>', report)
    assert len(strip) == 18 and strip[1] == ("fail", "turn 2 of 3: fail: check 2", "2", "✗")
