"""Pairwise A/B comparison (SPEC §8): both orders judged, winners only when they agree.

Everything goes through the real `openai` SDK over real HTTP to the scripted server in
`tests/judge_server.py`: a position-biased judge (always "first") and a consistent judge that
prefers whichever response carries a marker planted in one side's outputs.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from assay.findings import list_findings
from assay.finops.budget import Budget
from assay.finops.pricing import Prices
from assay.judge import OpenAIJudge, load_prompt
from assay.judge.port import PairRequest, PairVerdict, judge_pairs_all
from assay.judge.prompts import PAIR_SCHEMA, MalformedReply, parse_pair_reply
from assay.judge.redaction import RedactionSettings
from assay.judge.service import JudgeSetup
from assay.pairwise.compare import compare_outputs, pair_outcome, pairwise_setup, side_of
from assay.pairwise.options import CompareOptions
from assay.pairwise.render import markdown_report
from assay.pairwise.report import PairwiseReport, load_report
from assay.stats import wilson
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite
from tests.conftest import EXAMPLES, PREFECT_HOME
from tests.judge_server import (
    JudgeServer,
    RecordedRequest,
    Reply,
    malformed,
    pair_verdict,
    prefers,
    server_error,
)

SUITE = EXAMPLES / "support-suite.yaml"
PAIRS = 8  # cases with an llm_judge rubric in the example suite (all answered in v1)
MARK_A = "MARK-A-3f1c"
MARK_B = "MARK-B-77d0"
CANARY = "CANARY-pairwise-b51e-never-stored"
MODEL = "judge-pairwise-1"


def _outputs(tmp_path: Path, name: str, suffix: str, drop: frozenset[str] = frozenset()) -> str:
    """The v1 example outputs with `suffix` appended to every output (minus `drop`)."""
    rows = [
        json.loads(line)
        for line in (EXAMPLES / "outputs" / "support-bot-v1.jsonl").read_text().splitlines()
    ]
    path = tmp_path / f"{name}.jsonl"
    path.write_text(
        "".join(
            json.dumps({**row, "output": f"{row['output']} {suffix}"}) + "\n"
            for row in rows
            if row["case_id"] not in drop
        )
    )
    return str(path)


def _judge(server: JudgeServer, **options: Any) -> OpenAIJudge:
    settings: dict[str, Any] = {
        "timeout": 5.0,
        "max_attempts": 3,
        "deadline_seconds": 10.0,
        "backoff_seconds": 0.01,
        "max_backoff_seconds": 0.02,
    }
    settings.update(options)
    return OpenAIJudge(MODEL, base_url=server.base_url, api_key="test", **settings)


def _setup(server: JudgeServer, **fields: Any) -> JudgeSetup:
    base = JudgeSetup(
        make_judge=partial(_judge, server),
        skip_reason="",
        model=MODEL,
        prompt_version=load_prompt().version,
        max_concurrency=4,
        prices=Prices(input_per_million=1.0, output_per_million=2.0),
        budgets=[],
    )
    setup = pairwise_setup(base)
    for name, value in fields.items():
        setattr(setup, name, value)
    return setup


def _compare(
    store: FileStore, a: str, b: str, setup: JudgeSetup, comparison_id: str = "cmp-1"
) -> PairwiseReport:
    suite = load_suite(SUITE)
    version, _ = registry.publish(store, suite)
    return compare_outputs(
        store, version, suite, a, b, setup, comparison_id=comparison_id, label_a="v1", label_b="v2"
    )


def _pair(first: str = "Within 30 days.", second: str = "Any time.") -> PairRequest:
    return PairRequest(
        case_id="window-40-days",
        input="Can I return shoes after 40 days?",
        expected="No. Returns are accepted within 30 days.",
        rubric="Says returns close after 30 days.",
        first=first,
        second=second,
    )


# --- port, prompt and adapter -----------------------------------------------------------------


def test_pair_request_keeps_both_outputs_out_of_repr_and_dumps() -> None:
    request = _pair(f"first {CANARY}", f"second {CANARY}")
    assert CANARY not in repr(request)
    assert CANARY not in request.model_dump_json()
    assert "first" not in request.model_dump() and "second" not in request.model_dump()


def test_pair_verdicts_fail_closed() -> None:
    with pytest.raises(ValidationError):
        PairVerdict(status="judged", winner=None, reason="judged")
    with pytest.raises(ValidationError):
        PairVerdict(status="skipped", winner="first", reason="malformed reply")
    with pytest.raises(ValidationError):
        PairVerdict(status="judged", winner="first", reason="the judge said so")
    with pytest.raises(ValidationError):
        PairVerdict(status="judged", winner="both", reason="judged")  # type: ignore[arg-type]
    assert PairVerdict.skipped("budget_blocked").winner is None


@pytest.mark.parametrize(
    ("text", "winner"),
    [
        ('{"reasoning": "r", "winner": "first"}', "first"),
        ('```json\n{"reasoning": "r", "winner": "second", "x": 1}\n```', "second"),
        ('{"reasoning": "", "winner": "tie"}', "tie"),
    ],
)
def test_pair_replies_parse_strictly(text: str, winner: str) -> None:
    assert parse_pair_reply(text) == winner


@pytest.mark.parametrize(
    "text",
    [
        None,
        "First is better.",
        '{"reasoning": "r", "winner": "First"}',
        '{"reasoning": "r", "winner": "A"}',
        '{"winner": "first"}',
        '{"reasoning": 1, "winner": "first"}',
        '{"reasoning": "r", "winner": "first", "winner": "second"}',
        '{"reasoning": "r", "winner": "first"} {"winner": "second"}',
        '["first"]',
    ],
)
def test_malformed_pair_replies_are_rejected(text: str | None) -> None:
    with pytest.raises(MalformedReply):
        parse_pair_reply(text)


def test_judge_pair_sends_the_pairwise_prompt_and_schema_and_discards_reasoning(
    judge_server: JudgeServer,
) -> None:
    judge_server.script(pair_verdict("second", reasoning=f"Because {CANARY}.", usage=(200, 40)))
    judge = _judge(judge_server)

    async def run() -> PairVerdict:
        async with judge:
            return await judge.judge_pair(_pair("Any time.", "Within 30 days."))

    result = asyncio.run(run())

    assert result == PairVerdict(
        status="judged",
        winner="second",
        reason="judged",
        mode="json_schema",
        model=MODEL,
        prompt_version=load_prompt("pairwise").version,
        input_tokens=200,
        output_tokens=40,
    )
    assert judge.pairwise_prompt_version == load_prompt("pairwise").version
    assert CANARY not in result.model_dump_json() and CANARY not in repr(result)
    (sent,) = judge_server.requests
    assert sent.is_pairwise
    assert (sent.response(1), sent.response(2)) == ("Any time.", "Within 30 days.")
    response_format = sent.body["response_format"]
    assert response_format["json_schema"]["name"] == "pairwise_verdict"
    assert response_format["json_schema"]["schema"] == PAIR_SCHEMA
    assert list(PAIR_SCHEMA["properties"]) == ["reasoning", "winner"]  # reasoning first


def test_judge_pair_falls_back_like_single_verdicts_and_skips_malformed_replies(
    judge_server: JudgeServer,
) -> None:
    judge_server.script(llama_cpp=True, default=prefers("30 days"))
    judge = _judge(judge_server)

    async def run(request: PairRequest) -> PairVerdict:
        async with judge:
            return await judge.judge_pair(request)

    fallback = asyncio.run(run(_pair()))
    assert (fallback.status, fallback.winner, fallback.mode) == ("judged", "first", "json_object")
    assert judge_server.requests[-1].body["response_format"] == {
        "type": "json_object",
        "schema": PAIR_SCHEMA,
    }

    judge_server.script(default=malformed('{"reasoning": "r", "winner": "A"}'))
    bad = asyncio.run(run(_pair()))
    assert (bad.status, bad.winner, bad.reason) == ("skipped", None, "malformed reply")
    assert bad.input_tokens > 0  # the discarded replies were still billed


def test_judge_pairs_all_bounds_concurrency_and_keeps_order(judge_server: JudgeServer) -> None:
    def slow_preference(recorded: RecordedRequest) -> Reply:
        reply = prefers("30 days")(recorded)
        return Reply(content=reply.content, delay=0.05)

    judge_server.script(default=slow_preference)
    requests = [_pair() if i % 2 else _pair("Any time.", "Within 30 days.") for i in range(8)]
    judge = _judge(judge_server)

    async def run() -> list[PairVerdict]:
        async with judge:
            return await judge_pairs_all(judge, requests, max_concurrency=2)

    winners = [v.winner for v in asyncio.run(run())]

    assert winners == ["second", "first"] * 4
    assert judge_server.max_in_flight <= 2


def test_a_winner_needs_both_orders_to_agree() -> None:
    def judged(winner: str) -> PairVerdict:
        return PairVerdict(status="judged", winner=winner, reason="judged")  # type: ignore[arg-type]

    skipped = PairVerdict.skipped("judge unavailable: InternalServerError")
    assert (side_of("first", "ab"), side_of("first", "ba")) == ("a", "b")
    assert (side_of("second", "ab"), side_of("second", "ba")) == ("b", "a")
    assert pair_outcome(judged("first"), judged("second")) == "a"  # A first, then A second
    assert pair_outcome(judged("second"), judged("first")) == "b"
    assert pair_outcome(judged("tie"), judged("tie")) == "tie"
    assert pair_outcome(judged("first"), judged("first")) == "inconsistent"  # position bias
    assert pair_outcome(judged("tie"), judged("second")) == "inconsistent"
    assert pair_outcome(judged("first"), skipped) == "unjudged"
    assert pair_outcome(skipped, judged("second")) == "unjudged"


# --- the comparison, without Prefect ----------------------------------------------------------


def test_no_judge_leaves_every_pair_unjudged(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "evidence")
    setup = JudgeSetup(None, "no credentials")
    report = _compare(
        store, _outputs(tmp_path, "a", MARK_A), _outputs(tmp_path, "b", MARK_B), setup
    )

    assert (report.cases_compared, report.unjudged, report.judged) == (PAIRS, PAIRS, 0)
    assert report.unjudged_reasons == {"no credentials": PAIRS}
    assert (report.wins_a, report.wins_b, report.calls) == (0, 0, 0)
    assert report.win_rate_a.rate is None and report.win_rate_a.lo is None
    assert report.position_consistency.judged == 0


def test_budget_stop_makes_no_call_and_records_a_finding(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    tiny = Budget(name="tiny", limit_usd=1e-6, period="day", mode="block", scope="*")
    a, b = _outputs(tmp_path, "a", MARK_A), _outputs(tmp_path, "b", MARK_B)

    blocked = _compare(store, a, b, _setup(judge_server, budgets=[tiny]), "cmp-blocked")
    refused = _compare(store, a, b, _setup(judge_server, budgets=None), "cmp-refused")

    assert judge_server.requests == []
    assert (blocked.unjudged, blocked.calls, blocked.wins_a) == (PAIRS, 0, 0)
    assert blocked.unjudged_reasons == {"budget_blocked": PAIRS}
    assert blocked.budget is not None and blocked.budget.status == "blocked"
    assert refused.budget is not None and refused.budget.status == "refused"
    assert refused.unjudged_reasons == {"budget_blocked": PAIRS}
    assert [f.kind for f in list_findings(store, "cmp-blocked")] == ["budget_blocked"]
    assert list(store.list("costs/")) == []


def test_persistent_500s_leave_pairs_unjudged_never_won(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    suite = load_suite(SUITE)
    broken_input = next(c.input for c in suite.cases if c.id == "gift-return")

    def flaky(recorded: RecordedRequest) -> Reply:
        if broken_input in recorded.text("user"):
            return server_error(500)
        return prefers(MARK_A)(recorded)

    judge_server.script(default=flaky)
    report = _compare(
        store,
        _outputs(tmp_path, "a", MARK_A),
        _outputs(tmp_path, "b", MARK_B),
        _setup(judge_server),
    )

    assert (report.cases_compared, report.unjudged, report.judged) == (PAIRS, 1, PAIRS - 1)
    assert report.unjudged_reasons == {"judge unavailable: InternalServerError": 1}
    assert (report.wins_a, report.wins_b, report.inconsistent) == (PAIRS - 1, 0, 0)
    assert report.win_rate_a.n == PAIRS - 1
    assert report.calls == 2 * PAIRS
    # Only judged orders are cached: the failed pair is asked again next time.
    assert len(list(store.list("judge-cache/pairwise/"))) == 2 * (PAIRS - 1)


def test_cases_without_rubric_or_output_are_counted_not_compared(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    judge_server.script(default=prefers(MARK_B))
    report = _compare(
        store,
        _outputs(tmp_path, "a", MARK_A, drop=frozenset({"gift-return", "order-1042-status"})),
        _outputs(tmp_path, "b", MARK_B, drop=frozenset({"shoe-warranty"})),
        _setup(judge_server),
    )

    assert report.cases == 50
    assert report.without_rubric == 50 - PAIRS
    assert (report.missing_a, report.missing_b) == (1, 1)  # order-1042-status has no rubric
    assert report.cases_compared == PAIRS - 2
    assert (report.wins_b, report.judged) == (PAIRS - 2, PAIRS - 2)
    assert len(judge_server.requests) == 2 * (PAIRS - 2)


# --- the flow, with Prefect -------------------------------------------------------------------


@pytest.fixture
def judge_env(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", MODEL)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    return judge_server


@pytest.mark.usefixtures("prefect_api")
def test_position_biased_judge_is_inconsistent_on_every_pair_and_cached_per_order(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    from flows.compare import compare

    judge_env.script(position_biased=True)
    a, b = _outputs(tmp_path, "a", MARK_A), _outputs(tmp_path, "b", MARK_B)

    first = compare(
        CompareOptions(suite=str(SUITE), outputs_a=a, outputs_b=b, label_a="v1", label_b="v2")
    )

    assert (first.cases_compared, first.judged, first.inconsistent) == (PAIRS, PAIRS, PAIRS)
    assert (first.wins_a, first.wins_b, first.ties, first.unjudged) == (0, 0, 0, 0)
    assert (first.position_consistency.consistent, first.position_consistency.judged) == (
        0,
        PAIRS,
    )
    assert first.position_consistency.rate == 0.0
    interval = wilson(0, PAIRS)
    assert interval is not None
    assert (first.position_consistency.lo, first.position_consistency.hi) == interval
    assert first.win_rate_a.rate == first.win_rate_b.rate == 0.0
    # Two calls per case: the cache key includes the presentation order.
    assert first.calls == len(judge_env.requests) == 2 * PAIRS
    assert all(request.is_pairwise for request in judge_env.requests)
    assert first.cost_usd == pytest.approx(2 * PAIRS * (120 * 1.0 + 30 * 2.0) / 1e6)
    # the default redaction settings are part of the recorded version
    pairwise_version = RedactionSettings().prompt_version(load_prompt("pairwise").version)
    assert first.judge.prompt_version == pairwise_version
    store = FileStore(store_dir)
    assert len(list(store.list("judge-cache/pairwise/"))) == 2 * PAIRS
    assert load_report(store, first.comparison_id) == first
    # One summary per judged batch, standing for the records written as each call returned.
    batch = re.compile(r"-s[0-9a-f]{32}\.json$")
    (ledger,) = [k for k in store.list("costs/") if first.comparison_id in k and batch.search(k)]
    assert json.loads(store.get(ledger))["calls"] == 2 * PAIRS

    second = compare(
        CompareOptions(suite=str(SUITE), outputs_a=a, outputs_b=b, label_a="v1", label_b="v2")
    )

    assert (second.calls, second.cache_hits) == (0, 2 * PAIRS)
    assert len(judge_env.requests) == 2 * PAIRS  # the cache spent nothing
    assert second.inconsistent == PAIRS
    assert second.comparison_id != first.comparison_id

    fresh = compare(CompareOptions(suite=str(SUITE), outputs_a=a, outputs_b=b, fresh_judge=True))
    assert (fresh.calls, fresh.cache_hits) == (2 * PAIRS, 0)


@pytest.mark.usefixtures("prefect_api")
def test_consistent_judge_declares_winners_and_the_swapped_comparison_reuses_the_cache(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    from flows.compare import compare

    judge_env.script(default=prefers(MARK_A))
    a, b = _outputs(tmp_path, "a", MARK_A), _outputs(tmp_path, "b", MARK_B)

    report = compare(
        CompareOptions(suite=str(SUITE), outputs_a=a, outputs_b=b, label_a="v1", label_b="v2")
    )

    assert (report.wins_a, report.wins_b, report.ties, report.inconsistent) == (PAIRS, 0, 0, 0)
    assert report.position_consistency.consistent == report.position_consistency.judged == PAIRS
    assert report.position_consistency.rate == report.win_rate_a.rate == 1.0
    interval = wilson(PAIRS, PAIRS)
    assert interval is not None
    assert (report.position_consistency.lo, report.position_consistency.hi) == interval
    assert (report.win_rate_a.lo, report.win_rate_a.hi) == interval
    assert (report.win_rate_a.wins, report.win_rate_a.n) == (PAIRS, PAIRS)
    assert report.win_rate_b.rate == 0.0
    # A is shown first in one order and second in the other, and the judge followed it.
    shown_first = [r.response(1) or "" for r in judge_env.requests]
    assert sum(MARK_A in text for text in shown_first) == PAIRS

    # B vs A presents exactly the same (first, second) pairs: all cache hits, winners mirrored.
    swapped = compare(
        CompareOptions(suite=str(SUITE), outputs_a=b, outputs_b=a, label_a="v2", label_b="v1")
    )
    assert (swapped.calls, swapped.cache_hits) == (0, 2 * PAIRS)
    assert (swapped.wins_a, swapped.wins_b) == (0, PAIRS)

    markdown = markdown_report(report)
    assert f"| v1 wins | {PAIRS} | {PAIRS}/{PAIRS} |" in markdown
    assert "| position consistency | 1.000 |" in markdown
    assert f"{interval.lo:.3f}–1.000" in markdown


@pytest.mark.usefixtures("prefect_api")
def test_server_errors_count_as_unjudged_in_the_flow(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    from flows.compare import compare

    judge_env.script(default=server_error(500, headers={"Retry-After": "0"}))

    report = compare(
        CompareOptions(
            suite=str(SUITE),
            outputs_a=_outputs(tmp_path, "a", MARK_A),
            outputs_b=_outputs(tmp_path, "b", MARK_B),
        )
    )

    assert (report.unjudged, report.judged, report.wins_a, report.wins_b) == (PAIRS, 0, 0, 0)
    assert report.unjudged_reasons == {"judge unavailable: InternalServerError": PAIRS}
    assert report.win_rate_a.rate is None and report.position_consistency.rate is None
    assert list(FileStore(store_dir).list("judge-cache/")) == []


@pytest.mark.usefixtures("prefect_api")
def test_canary_in_outputs_and_reasoning_reaches_neither_the_store_nor_prefect(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    from flows.compare import compare

    judge_env.script(default=prefers(CANARY, reasoning=f"Reasoning {CANARY}-R"))

    report = compare(
        CompareOptions(
            suite=str(SUITE),
            outputs_a=_outputs(tmp_path, "a", f"{MARK_A} {CANARY}"),
            outputs_b=_outputs(tmp_path, "b", MARK_B),
        )
    )

    assert report.wins_a == PAIRS
    assert CANARY not in report.model_dump_json()
    needle = CANARY.encode()
    stored = [p for p in store_dir.rglob("*") if p.is_file()]
    assert any("comparisons" in p.parts for p in stored)
    assert [p for p in stored if needle in p.read_bytes()] == []
    # Prefect's home (its database included) holds parameters, states, logs and artifacts.
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)
    time.sleep(1.0)  # the API server writes log batches asynchronously
    leaked = [p for p in PREFECT_HOME.rglob("*") if p.is_file() and needle in p.read_bytes()]
    assert leaked == []


def test_report_is_written_once_and_a_retry_returns_the_first(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    judge_server.script(default=prefers(MARK_A))
    a, b = _outputs(tmp_path, "a", MARK_A), _outputs(tmp_path, "b", MARK_B)

    first = _compare(store, a, b, _setup(judge_server), "cmp-retry")
    retried = _compare(store, a, b, _setup(judge_server), "cmp-retry")

    assert retried == first  # first writer wins, like the ledger
    assert (first.calls, first.cache_hits) == (2 * PAIRS, 0)
    assert load_report(store, "cmp-retry").occurred_at <= datetime.now(UTC)
    assert len(judge_server.requests) == 2 * PAIRS  # the retry was answered by the cache


@pytest.mark.usefixtures("prefect_api")
def test_cli_compare_reports_position_consistency(judge_env: JudgeServer, store_dir: Path) -> None:
    from typer.testing import CliRunner

    from assay.cli import app

    judge_env.script(position_biased=True)
    examples = Path(__file__).resolve().parent.parent / "examples"
    result = CliRunner().invoke(
        app,
        [
            "compare",
            str(examples / "support-suite.yaml"),
            "--a",
            str(examples / "outputs" / "support-bot-v1.jsonl"),
            "--b",
            str(examples / "outputs" / "support-bot-v2.jsonl"),
            "--label-a",
            "v1",
            "--label-b",
            "v2",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    consistency = report["position_consistency"]
    assert consistency["judged"] == report["judged"] > 0
    assert consistency["consistent"] == 0  # the biased judge always prefers the first answer
    assert report["inconsistent"] == report["judged"]
