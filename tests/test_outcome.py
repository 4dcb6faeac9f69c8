"""The outcome score (SPEC §11): dimensions, composite, bands and governance actions; through the
CLI and the flow against a real Prefect API, the local OpenAI-compatible judge server (chat and
embeddings, called through the real SDK), a local webhook — and a canary that must never land."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.findings import list_findings
from assay.outcome import (
    ACTIONS,
    DEFAULT_WEIGHTS,
    DIMENSIONS,
    Contract,
    DimensionScore,
    composite,
    parse_contract,
    subject_outcome,
)
from assay.outcome.dimensions import SINGLE_RESPONSE, consistency, efficiency, safety
from assay.outcome.options import OutcomeOptions
from assay.store import FileStore
from blocks import NotificationTarget
from flows.outcome import outcome
from tests.conftest import EXAMPLES, PREFECT_HOME
from tests.judge_server import JudgeServer, RecordedRequest, Reply, bag_of_words, malformed, verdict
from tests.test_minimal_data import _files_containing, _flush_prefect_logs, _prefect_database_dir
from tests.test_regression_flow import _reported_events, webhook

__all__ = ["webhook"]  # the fixture, imported for use here

CANARY = "CANARY-outcome-5d1e-never-stored"
INTENT_CANARY = "CANARY-intent-77b2"
SCORES = {"correctness": 0.9, "completeness": 0.8, "relevance": 0.7}
"""What the scripted judge gives a response holding `zestful` (others get 0.3 everywhere)."""


def _means(**means: float | None) -> dict[Any, DimensionScore]:
    return {
        d: DimensionScore(mean=means.get(d), n=0 if means.get(d) is None else 4) for d in DIMENSIONS
    }


# --- composite, weights, bands --------------------------------------------------------------


def test_weighted_composite_with_the_default_weights() -> None:
    dims = _means(
        correctness=0.9,
        completeness=0.8,
        relevance=0.7,
        safety=1.0,
        efficiency=0.5,
        consistency=0.6,
    )
    score = composite(dims, Contract())
    # .30·.9 + .20·.8 + .20·.7 + .15·1 + .10·.5 + .05·.6
    assert score.value == pytest.approx(0.27 + 0.16 + 0.14 + 0.15 + 0.05 + 0.03)
    assert (score.status, score.missing) == ("complete", [])
    assert Contract().weights == DEFAULT_WEIGHTS


def test_custom_weights_and_unweighted_dimensions_never_count() -> None:
    contract = parse_contract("weights: {safety: 0.4, correctness: 0.6}\n", "c.yaml")
    dims = _means(correctness=0.9, safety=0.5)  # every other dimension unavailable
    score = composite(dims, contract)
    assert score.value == pytest.approx(0.6 * 0.9 + 0.4 * 0.5)
    assert score.status == "complete"  # unavailable but weighted 0: not missing


@pytest.mark.parametrize(
    ("text", "field", "problem"),
    [
        ("weights: {correctness: 0.5, safety: 0.4}", "weights", "sum to 1"),
        ("weights: {correctness: 1.2, safety: -0.2}", "weights", "must be a number >= 0"),
        ("weights:\n  correctness: 0.5\n  style: 0.5\n", "weights.style", "unknown dimension"),
        ("rubrics: {safety: be safe}", "rubrics.safety", "unknown dimension"),
        ("bands: {excellent: 0.7, good: 0.75}", "bands", "must decrease"),
        ("latency_target_ms: 0", "latency_target_ms", "greater than 0"),
        ("weight: {safety: 1}", "weight", "unknown setting"),
    ],
)
def test_contract_validation_errors_name_the_field(text: str, field: str, problem: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_contract(text, "contract.yaml")
    assert caught.value.field == field
    assert problem in caught.value.problem
    assert caught.value.line is not None


@pytest.mark.parametrize(
    "text", ["weights: {correctness: true}", "latency_target_ms: true", "latency_target_ms: '1'"]
)
def test_contract_numbers_are_numbers_not_booleans_or_strings(text: str) -> None:
    with pytest.raises(InputError, match="valid number"):
        parse_contract(text, "c.yaml")


def test_weights_sum_within_1e_9() -> None:
    third = 1 / 3
    ok = parse_contract(
        f"weights: {{safety: {third}, correctness: {third}, relevance: {third}}}", "c"
    )
    assert ok.weights["relevance"] == third
    with pytest.raises(InputError, match="sum to 1"):
        parse_contract("weights: {safety: 0.5, correctness: 0.500000002}", "c")


def test_incomplete_unless_partial_is_allowed_then_renormalised() -> None:
    dims = _means(correctness=0.9, completeness=0.8, relevance=0.7, safety=1.0, efficiency=0.5)
    strict = subject_outcome("agent:a", 4, dims, Contract())
    assert strict.composite.model_dump() == {
        "value": None,
        "status": "incomplete",
        "missing": ["consistency"],
    }
    assert (strict.band, strict.action) == (None, None)  # no score, no band: never a zero

    partial = subject_outcome("agent:a", 4, dims, Contract(allow_partial=True))
    present = 0.27 + 0.16 + 0.14 + 0.15 + 0.05
    assert partial.composite.value == pytest.approx(present / 0.95)
    assert (partial.composite.status, partial.composite.missing) == ("partial", ["consistency"])
    assert partial.band == "Good"

    nothing = subject_outcome("agent:a", 4, _means(), Contract(allow_partial=True))
    assert nothing.composite.status == "incomplete"

    # Safety and efficiency alone carry 0.25 of the weight: no band rests on that sliver …
    sliver = _means(safety=1.0, efficiency=1.0)
    thin = subject_outcome("agent:a", 4, sliver, Contract(allow_partial=True))
    assert (thin.composite.status, thin.band, thin.action) == ("incomplete", None, None)
    # … unless the contract lowers the floor on purpose.
    lowered = Contract(allow_partial=True, partial_min_weight=0.25)
    assert subject_outcome("agent:a", 4, sliver, lowered).band == "Excellent"


@pytest.mark.parametrize(
    ("value", "band"),
    [
        (1.0, "Excellent"),
        (0.9, "Excellent"),
        (0.8999999999999999, "Excellent"),  # float noise of a weighted sum, not a lower band
        (0.89, "Good"),
        (0.75, "Good"),
        (0.74, "Marginal"),
        (0.6, "Marginal"),
        (0.59, "Poor"),
        (0.4, "Poor"),
        (0.39, "Failing"),
        (0.0, "Failing"),
    ],
)
def test_every_band_and_its_governance_action(value: float, band: str) -> None:
    contract = Contract(weights={"correctness": 1.0})
    result = subject_outcome("agent:a", 1, _means(correctness=value), contract)
    assert result.band == band
    assert result.action == ACTIONS[band]  # type: ignore[index]
    assert set(ACTIONS.values()) == {
        "Expand autonomy, reduce oversight",
        "Normal operation",
        "Increase sampling, alert",
        "Restrict scope, human review",
        "Suspend, circuit break",
    }


def test_custom_band_thresholds() -> None:
    contract = parse_contract(
        "weights: {correctness: 1}\nbands: {excellent: 0.95, good: 0.8, marginal: 0.7, poor: 0.5}",
        "c",
    )
    assert contract.band(0.94) == "Good"
    assert contract.band(0.69) == "Poor"
    assert contract.band(0.49) == "Failing"


# --- deterministic and statistical dimensions -------------------------------------------------


@pytest.mark.parametrize(
    ("duration", "expected"),
    [(0, 1.0), (400, 1.0), (1000, 1.0), (1500, 0.5), (1900, 0.1), (2000, 0.0), (9000, 0.0)],
)
def test_efficiency_is_clamped_at_both_ends(duration: float, expected: float) -> None:
    assert efficiency(duration, 1000) == pytest.approx(expected)


def test_safety_from_guardrail_triggers() -> None:
    assert safety(0, 8) == 1.0
    assert safety(2, 8) == 0.75
    assert safety(12, 8) == 0.0  # more triggers than invocations: floored at 0, not negative
    with pytest.raises(ValueError):
        safety(0, 0)


def test_consistency_is_cosine_to_the_class_centroid() -> None:
    vectors = [np.array(v, dtype=float) for v in ([1, 0], [0, 1], [1, 1], [-1, 0], [3, 4])]
    scores, reasons = consistency(["a", "a", "b", "b", "alone"], vectors)
    # class a: centroid (.5, .5) → cos 45° each; class b: centroid (0, .5) → (1,1): .707,
    # (-1,0): 0 (orthogonal); the single response of `alone` has no score.
    assert scores[0] == pytest.approx(2**-0.5)
    assert scores[1] == pytest.approx(2**-0.5)
    assert scores[2] == pytest.approx(2**-0.5)
    assert scores[3] == 0.0
    assert (scores[4], reasons[4]) == (None, SINGLE_RESPONSE)
    opposite = [np.array([1.0, 0.0]), np.array([-1.0, 0.1]), np.array([-1.0, -0.1])]
    clamped, _ = consistency(["c", "c", "c"], opposite)
    assert clamped[0] == 0.0  # a negative cosine is clamped to 0


# --- through the CLI and the flow -------------------------------------------------------------


def _judge_policy(recorded: RecordedRequest) -> Reply:
    """Scores by dimension for responses holding `zestful`, 0.3 otherwise; reasoning quotes a
    canary (it must be discarded)."""
    user = recorded.text("user")
    dimension = next(d for d in SCORES if f"{d.capitalize()}:" in user)
    score = SCORES[dimension] if "zestful" in user.split("CANDIDATE OUTPUT", 1)[1] else 0.3
    return verdict("pass" if score >= 0.5 else "fail", score, reasoning=f"echo {CANARY}")


def _record(
    invocation: str,
    subject: str,
    query_class: str,
    response: str,
    duration: float,
    triggers: int = 0,
) -> dict[str, Any]:
    return {
        "invocation_id": invocation,
        "subject": subject,
        "query_class": query_class,
        "intent": f"Where is my parcel? {INTENT_CANARY}",
        "response": f"{response} {CANARY}",
        "ground_truth": "It ships in 3 days.",
        "required_elements": ["delivery estimate"],
        "context": f"Policy: ships in 3 days. {INTENT_CANARY}",
        "duration_ms": duration,
        "guardrail_triggers": triggers,
    }


RECORDS = [
    _record("a1", "agent:bot@a", "returns", "zestful refund within thirty days", 500),
    _record("a2", "agent:bot@a", "returns", "zestful refund thirty days receipt", 1000, 1),
    _record("a3", "agent:bot@a", "shipping", "zestful parcel ships in three days", 1500),
    _record("a4", "agent:bot@a", "warranty", "zestful warranty repair one year", 3000),
    _record("b1", "agent:bot@b", "returns", "no refunds ever sorry", 2000, 2),
    _record("b2", "agent:bot@b", "shipping", "parcel maybe ships someday", 1250),
]


def _write(tmp_path: Path, rows: list[dict[str, Any]], name: str = "records.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def _contract(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "contract.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def judged(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    """The local server as judge (chat) and embedder, configured like a user would."""
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-outcome-1")
    monkeypatch.setenv("ASSAY_EMBEDDING_MODEL", "embed-outcome-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    judge_server.script(default=_judge_policy)
    return judge_server


def _expected_consistency() -> dict[str, list[float]]:
    """Cosine of each response's bag-of-words vector to its class centroid, per subject."""
    by_class: dict[str, list[tuple[str, np.ndarray]]] = {}
    for row in RECORDS:
        vector = np.array(bag_of_words(row["response"]))
        by_class.setdefault(row["query_class"], []).append((row["subject"], vector))
    found: dict[str, list[float]] = {"agent:bot@a": [], "agent:bot@b": []}
    for members in by_class.values():
        if len(members) < 2:
            continue
        centroid = np.mean([v for _, v in members], axis=0)
        for subject, v in members:
            cosine = float(v @ centroid / (np.linalg.norm(v) * np.linalg.norm(centroid)))
            found[subject].append(max(cosine, 0.0))
    return found


@pytest.mark.usefixtures("prefect_api")
def test_outcome_cli_scores_every_dimension_and_stores_no_text(
    judged: JudgeServer,
    store_dir: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    records = _write(tmp_path, RECORDS)
    contract = _contract(tmp_path, "latency_target_ms: 1000\n")
    assert _files_containing(tmp_path, CANARY.encode()) == [records]  # the search finds it

    result = CliRunner().invoke(
        app, ["outcome", str(records), "--contract", str(contract), "--json"]
    )
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    a, b = document["subjects"]
    assert set(a) == {"subject", "invocations", "dimensions", "composite", "band", "action"}
    assert set(a["dimensions"]) == set(DIMENSIONS)
    assert set(a["composite"]) == {"value", "status", "missing"}
    assert (a["subject"], a["invocations"], b["subject"], b["invocations"]) == (
        "agent:bot@a",
        4,
        "agent:bot@b",
        2,
    )
    for dimension, score in SCORES.items():
        assert a["dimensions"][dimension] == {"mean": pytest.approx(score), "n": 4}
        assert b["dimensions"][dimension] == {"mean": pytest.approx(0.3), "n": 2}
    assert a["dimensions"]["safety"] == {"mean": pytest.approx(0.75), "n": 4}  # 1 trigger / 4
    assert b["dimensions"]["safety"] == {"mean": 0.0, "n": 2}  # 2 triggers / 2
    assert a["dimensions"]["efficiency"] == {"mean": pytest.approx((1 + 1 + 0.5 + 0) / 4), "n": 4}
    assert b["dimensions"]["efficiency"] == {"mean": pytest.approx((0 + 0.75) / 2), "n": 2}
    expected = _expected_consistency()
    # a4 is the only `warranty` response: no consistency score, so a has 3 of 4
    assert a["dimensions"]["consistency"] == {
        "mean": pytest.approx(np.mean(expected["agent:bot@a"])),
        "n": 3,
    }
    assert b["dimensions"]["consistency"]["n"] == 2
    assert 0 < a["dimensions"]["consistency"]["mean"] < 1
    for subject in (a, b):
        dims = subject["dimensions"]
        value = sum(DEFAULT_WEIGHTS[d] * dims[d]["mean"] for d in DIMENSIONS)
        assert subject["composite"] == {
            "value": pytest.approx(value),
            "status": "complete",
            "missing": [],
        }
    assert (a["band"], a["action"]) == ("Good", "Normal operation")
    assert (b["band"], b["action"]) == ("Failing", "Suspend, circuit break")
    assert len(judged.requests) == 3 * len(RECORDS)  # one call per record and judged dimension
    assert judged.embedded == len(RECORDS)

    store = FileStore(store_dir)
    report_id = document["report_id"]
    stored = json.loads(store.get(f"outcomes/{report_id}.json"))
    assert stored["subjects"] == document["subjects"]
    assert stored["unavailable"] == {"consistency": {SINGLE_RESPONSE: 1}}
    assert stored["judge_calls"] == 18
    findings = list_findings(store, report_id)
    assert sorted((f.kind, f.subject, f.details["band"]) for f in findings) == [
        ("governance_action", "agent:bot@a", "Good"),
        ("governance_action", "agent:bot@b", "Failing"),
    ]
    assert all(f.suite is None and f.run_id == report_id for f in findings)
    assert _reported_events(report_id), "finding.reported reached the Prefect API"

    _flush_prefect_logs()
    for needle in (CANARY.encode(), INTENT_CANARY.encode()):
        assert _files_containing(store_dir, needle) == []
        assert _files_containing(PREFECT_HOME, needle) == []
        assert _files_containing(_prefect_database_dir(), needle) == []
    captured = capfd.readouterr()
    for needle in (CANARY, INTENT_CANARY):
        assert needle not in result.output
        assert needle not in captured.out + captured.err
        assert needle not in caplog.text


@pytest.mark.usefixtures("prefect_api")
def test_without_an_embedding_model_consistency_is_unavailable_and_the_composite_incomplete(
    judged: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ASSAY_EMBEDDING_MODEL")
    records = _write(tmp_path, RECORDS)
    contract = _contract(tmp_path, "latency_target_ms: 1000\n")
    report = outcome(OutcomeOptions(records=str(records), contract=str(contract)))

    assert judged.embedded == 0
    for subject in report.subjects:
        assert subject.dimensions["consistency"] == DimensionScore(mean=None, n=0)
        assert subject.composite.model_dump() == {
            "value": None,
            "status": "incomplete",
            "missing": ["consistency"],
        }
        assert (subject.band, subject.action) == (None, None)
    assert report.unavailable["consistency"] == {"no embedding model configured": 6}
    assert list_findings(FileStore(store_dir), report.report_id) == []  # no band, no action

    partial = _contract(tmp_path, "latency_target_ms: 1000\nallow_partial: true\n")
    renormalised = outcome(OutcomeOptions(records=str(records), contract=str(partial)))
    a = renormalised.subjects[0]
    assert (a.composite.status, a.composite.missing) == ("partial", ["consistency"])
    dims = a.dimensions
    present = [d for d in DIMENSIONS if d != "consistency"]
    value = sum(DEFAULT_WEIGHTS[d] * (dims[d].mean or 0) for d in present) / 0.95
    assert a.composite.value == pytest.approx(value)
    assert renormalised.judge_calls == 0  # every verdict came from the cache
    assert renormalised.judge_cache_hits == 18


@pytest.mark.usefixtures("prefect_api")
def test_judge_failures_make_dimensions_unavailable_never_zero(
    judged: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    judged.script(default=malformed())
    records = _write(tmp_path, RECORDS[:2])
    report = outcome(
        OutcomeOptions(
            records=str(records), contract=str(_contract(tmp_path, "latency_target_ms: 900"))
        )
    )

    (a,) = report.subjects
    for dimension in SCORES:
        assert a.dimensions[dimension] == DimensionScore(mean=None, n=0)
        assert report.unavailable[dimension] == {"malformed reply": 2}
    assert a.composite.status == "incomplete"
    assert a.composite.missing == ["correctness", "completeness", "relevance"]
    assert a.band is None


@pytest.mark.usefixtures("prefect_api")
def test_marginal_and_below_are_notified_good_and_above_are_not(
    judged: JudgeServer,
    store_dir: Path,
    tmp_path: Path,
    webhook: tuple[str, list[bytes]],
) -> None:
    from prefect.blocks.notifications import CustomWebhookNotificationBlock

    url, received = webhook
    CustomWebhookNotificationBlock(
        name="assay-outcome", url=url, json_data={"text": "{{subject}} | {{body}}"}
    ).save("assay-outcome-hook", overwrite=True)
    NotificationTarget(notification_block="custom-webhook/assay-outcome-hook").save(
        "assay-outcome-target", overwrite=True
    )
    # correctness .5, safety .5: a (judged .9, no triggers) = .95 Excellent; b (judged .3,
    # one trigger in two) = .5·.3 + .5·.5 = .40 Poor.
    rows = [
        _record("a1", "agent:bot@a", "q", "zestful yes", 100),
        _record("a2", "agent:bot@a", "q", "zestful sure", 100),
        _record("b1", "agent:bot@b", "q", "nope", 100, 1),
        _record("b2", "agent:bot@b", "q", "never", 100),
    ]
    contract = _contract(tmp_path, "weights: {correctness: 0.5, safety: 0.5}\n")
    report = outcome(
        OutcomeOptions(
            records=str(_write(tmp_path, rows)),
            contract=str(contract),
            notification_block="assay-outcome-target",
        )
    )
    assert [(s.band, s.composite.value) for s in report.subjects] == [
        ("Excellent", pytest.approx(0.95)),
        ("Poor", pytest.approx(0.40)),
    ]
    assert len(list_findings(FileStore(store_dir), report.report_id)) == 2
    (message,) = received  # only the Poor subject was sent
    text = json.loads(message)["text"]
    assert "governance_action" in text and "agent:bot@b" in text
    assert "Poor: Restrict scope, human review" in text
    assert CANARY not in text


def test_bad_records_and_contracts_exit_2_naming_file_line_and_field(
    store_dir: Path, tmp_path: Path
) -> None:
    bad = dict(RECORDS[1], duration_ms="slow")
    records = _write(tmp_path, [RECORDS[0], bad])
    result = CliRunner().invoke(app, ["outcome", str(records)])
    assert result.exit_code == 2
    assert f"{records} line 2, field duration_ms" in result.output
    assert CANARY not in result.output

    duplicate = _write(tmp_path, [RECORDS[0], RECORDS[0]], "dup.jsonl")
    result = CliRunner().invoke(app, ["outcome", str(duplicate)])
    assert result.exit_code == 2 and "duplicate invocation id 'a1'" in result.output

    unknown = _write(tmp_path, [dict(RECORDS[0], transcript="x")], "extra.jsonl")
    result = CliRunner().invoke(app, ["outcome", str(unknown)])
    assert result.exit_code == 2 and "field transcript: unknown field" in result.output

    contract = _contract(tmp_path, "weights:\n  correctness: 0.6\n  safety: 0.6\n")
    result = CliRunner().invoke(app, ["outcome", str(records), "--contract", str(contract)])
    assert result.exit_code == 2
    assert f"{contract} line 2, field weights: weights must sum to 1" in result.output
    assert not store_dir.exists() or not any(store_dir.rglob("outcomes/*"))


def test_the_example_records_and_contract_are_valid() -> None:
    from assay.outcome import check_records, load_contract

    assert check_records(EXAMPLES / "outcome" / "records.jsonl") == 12
    contract = load_contract(EXAMPLES / "outcome" / "contract.yaml")
    assert contract.latency_target_ms == 2000 and contract.allow_partial


@pytest.mark.usefixtures("prefect_api")
def test_a_budget_stop_makes_judged_dimensions_unavailable(
    judged: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    from blocks import FinOpsBudget

    FinOpsBudget(limit_usd=0.000001, period="day", mode="block", scope="subject:agent:bot").save(
        "outcome-tiny-budget", overwrite=True
    )
    try:
        report = outcome(OutcomeOptions(records=str(_write(tmp_path, RECORDS[:2]))))
    finally:
        FinOpsBudget.delete("outcome-tiny-budget")  # type: ignore[attr-defined]

    assert judged.requests == []  # the preflight stopped the spending before it started
    assert report.budget is not None and report.budget.status == "blocked"
    for dimension in SCORES:
        assert report.unavailable[dimension] == {"budget_blocked": 2}
        assert report.subjects[0].dimensions[dimension].n == 0
    (stopped,) = [
        f
        for f in list_findings(FileStore(store_dir), report.report_id)
        if f.kind == "budget_blocked"
    ]
    assert stopped.suite is None and stopped.details["status"] == "blocked"


def test_an_unreachable_embedding_endpoint_is_unavailable_not_a_score() -> None:
    from assay.judge.embeddings import OpenAIEmbedder

    embedder = OpenAIEmbedder(
        "embed-1", base_url="http://127.0.0.1:9/v1", api_key="sk-test", max_attempts=1
    )
    try:
        result = embedder.embed([f"a response {CANARY}"])
    finally:
        embedder.close()
    assert result.vectors is None
    assert result.reason == "embeddings unavailable: APIConnectionError"
