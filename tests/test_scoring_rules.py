"""Case and run aggregation rules (SPEC §5), evidence redaction, and seeded sampling."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from assay.hashing import OutputHasher
from assay.judge.port import NO_JUDGE
from assay.outputs.candidate import CandidateOutput
from assay.runs.metrics import RunMetrics, tally
from assay.runs.options import RunOptions
from assay.runs.sampling import select_cases
from assay.runs.scoring import (
    NO_OUTPUT,
    SHARED_SCORERS,
    CaseEvidence,
    CompiledSuite,
    score_case,
    score_missing,
    score_outputs,
)
from assay.scorers import Outcome, Scorer, ScorerSpec, Status
from assay.suites.suite import Case, Suite

CANARY = "CANARY-a41b77-confidential"
HASHER = OutputHasher(b"test-secret")


def case(case_id: str, *scorers: Any) -> Case:
    return Case(
        id=case_id,
        input=f"input for {case_id}",
        scorers=[ScorerSpec.model_validate(s) for s in scorers],
    )


def make_suite(*cases: Case, defaults: list[Any] | None = None) -> Suite:
    return Suite(
        suite="rules",
        defaults=[ScorerSpec.model_validate(s) for s in defaults or []],
        cases=list(cases),
    )


SUITE = make_suite(
    case("all-pass", {"contains": "refund"}, {"regex": r"\b30 days\b"}),
    case("two-of-three", {"contains": "refund"}, {"contains": "credit"}, "json_valid"),
    case("judge-only", {"llm_judge": "polite"}, {"llm_judge": "accurate"}),
    case("judge-and-check", {"llm_judge": "polite"}, {"contains": "refund"}),
    case("none-pass", {"exact": "no"}, {"contains": "zzz"}),
    case("defaulted"),
    defaults=[{"not_contains": "guarantee"}],
)
COMPILED = CompiledSuite.compile(SUITE)


def output(case_id: str, text: str) -> CandidateOutput:
    return CandidateOutput(case_id=case_id, output=text)


def score(case_id: str, text: str) -> CaseEvidence:
    return score_case(case_id, COMPILED.scorers[case_id], output(case_id, text), HASHER)


# --- case rule ------------------------------------------------------------------------------


def test_case_passes_when_every_scorer_passes() -> None:
    evidence = score("all-pass", "A refund within 30 days.")
    assert evidence.status is Status.PASS
    assert evidence.score == 1.0
    assert evidence.missing is False
    assert [c.status for c in evidence.checks] == [Status.PASS, Status.PASS]


def test_case_fails_when_any_scorer_fails_and_score_is_mean() -> None:
    evidence = score("two-of-three", "a refund or store credit")
    # contains refund: pass; contains credit: pass; json_valid: fail
    assert evidence.status is Status.FAIL
    assert evidence.score == pytest.approx(2 / 3)
    assert [c.status for c in evidence.checks] == [Status.PASS, Status.PASS, Status.FAIL]


def test_case_with_no_passing_scorer_scores_zero() -> None:
    evidence = score("none-pass", "yes")
    assert evidence.status is Status.FAIL
    assert evidence.score == 0.0


def test_case_with_only_judge_scorers_is_skipped_with_no_score() -> None:
    evidence = score("judge-only", "Thank you!")
    assert evidence.status is Status.SKIPPED
    assert evidence.score is None
    assert [c.status for c in evidence.checks] == [Status.SKIPPED, Status.SKIPPED]
    assert evidence.label == "all checks skipped; 2 skipped (no judge configured)"


def test_skipped_scorers_are_excluded_from_case_score_and_status() -> None:
    passing = score("judge-and-check", "your refund")
    assert passing.status is Status.PASS
    assert passing.score == 1.0
    failing = score("judge-and-check", "no money back")
    assert failing.status is Status.FAIL
    assert failing.score == 0.0


def test_case_without_scorers_uses_suite_defaults() -> None:
    assert [s.name for s in COMPILED.scorers["defaulted"]] == ["not_contains"]
    assert score("defaulted", "a plain answer").status is Status.PASS
    assert score("defaulted", "we guarantee it").status is Status.FAIL


def test_scorer_error_makes_the_case_an_error() -> None:
    def boom(text: str) -> Outcome:
        raise ZeroDivisionError

    ok = Scorer("ok", "ok", lambda text: Outcome(Status.PASS, 1.0))
    evidence = score_case("c", (ok, Scorer("boom", "boom", boom)), output("c", CANARY), HASHER)
    assert evidence.status is Status.ERROR
    assert evidence.score == 0.5
    assert "scorer error (ZeroDivisionError)" in evidence.label
    metrics = tally([evidence])
    assert (metrics.scored, metrics.failed, metrics.errors, metrics.passed) == (1, 1, 1, 0)


def test_identical_scorer_configurations_are_compiled_once() -> None:
    shared = COMPILED.scorers["all-pass"][0]
    assert COMPILED.scorers["two-of-three"][0] is shared
    assert COMPILED.scorers["judge-and-check"][1] is shared


def test_a_scorer_of_one_case_is_compiled_when_scored_and_not_kept_for_the_run() -> None:
    suite = make_suite(
        *(case(f"c{i}", {"contains": "refund"}, {"numeric_range": {"max": i}}) for i in range(20))
    )
    compiled = CompiledSuite.compile(suite)
    shared, first = compiled.scorers["c0"]
    outputs = [output(f"c{i}", "a refund of 7") for i in range(20)]
    assert (tally(score_outputs(compiled, outputs, HASHER)).failed, len(compiled.scorers)) == (
        7,
        20,
    )
    again = compiled.scorers["c0"]
    assert again[0] is shared  # used by every case: compiled once
    assert again[1] is not first  # only this case's: compiled each time it is scored
    assert again[1].label == first.label == "numeric_range […, 0]"
    assert set(compiled.scorers) == set(compiled.cases)


def test_shared_scorers_kept_are_bounded() -> None:
    pairs = SHARED_SCORERS + 1  # each spec shared by two cases
    suite = make_suite(
        *(case(f"{side}{i}", {"numeric_range": {"max": i}}) for i in range(pairs) for side in "ab")
    )
    compiled = CompiledSuite.compile(suite)
    first = compiled.scorers["a0"][0]
    assert compiled.scorers["b0"][0] is first
    for i in range(pairs):
        compiled.scorers[f"a{i}"]
    assert compiled.scorers["b0"][0] is not first  # compiled again once the bound was passed


# --- missing outputs ------------------------------------------------------------------------


def test_missing_output_is_failed_no_output_with_score_zero() -> None:
    (evidence,) = score_missing(COMPILED, ["all-pass"])
    assert evidence.case_id == "all-pass"
    assert evidence.status is Status.FAIL
    assert evidence.score == 0.0
    assert evidence.missing is True
    assert evidence.label == NO_OUTPUT == "no output"
    assert evidence.output_hmac is None
    assert evidence.checks == []


def test_missing_output_counts_as_missing_and_failed_and_lowers_the_score() -> None:
    present = score("all-pass", "refund within 30 days")
    metrics = tally([present, *score_missing(COMPILED, ["two-of-three"])])
    assert metrics.cases == 2
    assert metrics.scored == 2
    assert metrics.passed == 1
    assert metrics.failed == 1
    assert metrics.missing == 1
    assert metrics.score == 0.5
    assert metrics.pass_rate == 0.5


def test_missing_output_of_a_judge_only_case_is_still_failed() -> None:
    (evidence,) = score_missing(COMPILED, ["judge-only"])
    assert evidence.status is Status.FAIL
    metrics = tally([evidence])
    assert (metrics.scored, metrics.skipped, metrics.failed) == (1, 0, 1)


# --- evidence redaction ---------------------------------------------------------------------


@pytest.mark.parametrize("case_id", [c.id for c in SUITE.cases])
@pytest.mark.parametrize(
    "text", [CANARY, f"refund {CANARY} 30 days", f'{{"x": "{CANARY}"}}', CANARY * 200]
)
def test_evidence_label_is_short_and_never_contains_output(case_id: str, text: str) -> None:
    evidence = score(case_id, text)
    assert len(evidence.label) <= 120
    assert CANARY not in evidence.label
    assert CANARY not in evidence.model_dump_json()


def test_label_of_many_failing_long_scorers_is_clamped() -> None:
    long_scorers = [{"contains": f"{n}-" + "v" * 300} for n in range(5)]
    suite = make_suite(case("long", *long_scorers))
    compiled = CompiledSuite.compile(suite)
    evidence = score_case("long", compiled.scorers["long"], output("long", "nothing"), HASHER)
    assert evidence.status is Status.FAIL
    assert len(evidence.label) == 120
    assert evidence.label.endswith("…")
    CaseEvidence.model_validate(evidence.model_dump())  # passes its own max_length check


def test_passing_label_counts_checks() -> None:
    assert score("all-pass", "refund within 30 days").label == "2 checks passed"
    assert score("defaulted", "fine").label == "1 check passed"


def test_failing_label_names_failing_scorer_and_reason() -> None:
    evidence = score("two-of-three", "refund and credit")
    assert evidence.label == "json_valid: not valid JSON"


def test_output_hmac_is_set_for_present_outputs() -> None:
    evidence = score("all-pass", "refund within 30 days")
    assert evidence.output_hmac == HASHER("refund within 30 days")
    assert evidence.output_hmac is not None
    assert evidence.output_hmac.startswith("hmac-sha256:")


def test_score_outputs_scores_each_output_against_its_case() -> None:
    results = score_outputs(
        COMPILED,
        [output("none-pass", "no"), output("all-pass", "nothing")],
        HASHER,
    )
    assert [(e.case_id, e.status) for e in results] == [
        ("none-pass", Status.FAIL),
        ("all-pass", Status.FAIL),
    ]
    assert results[0].score == 0.5  # exact "no" passes, contains "zzz" fails


# --- run rule -------------------------------------------------------------------------------


def evidence_of(status: Status, score: float | None, missing: bool = False) -> CaseEvidence:
    return CaseEvidence(
        case_id="c",
        status=status,
        score=score,
        missing=missing,
        output_hmac=None,
        label="l",
        checks=[],
    )


def test_run_metrics_count_every_kind_of_case() -> None:
    metrics = tally(
        [
            score("all-pass", "refund within 30 days"),  # pass 1.0
            score("two-of-three", "refund credit"),  # fail 2/3
            score("judge-only", "hi"),  # skipped
            *score_missing(COMPILED, ["none-pass"]),  # missing: fail 0.0
        ]
    )
    assert metrics.cases == 4
    assert metrics.scored == 3
    assert metrics.passed == 1
    assert metrics.failed == 2
    assert metrics.skipped == 1
    assert metrics.missing == 1
    assert metrics.errors == 0
    assert metrics.skipped_checks == 2
    assert metrics.pass_rate == pytest.approx(1 / 3)
    assert metrics.score == pytest.approx((1.0 + 2 / 3 + 0.0) / 3)


def test_skipped_cases_do_not_change_pass_rate_or_score() -> None:
    base = [evidence_of(Status.PASS, 1.0), evidence_of(Status.FAIL, 0.25)]
    with_skips = [*base, evidence_of(Status.SKIPPED, None), evidence_of(Status.SKIPPED, None)]
    assert tally(with_skips).pass_rate == tally(base).pass_rate == 0.5
    assert tally(with_skips).score == tally(base).score == 0.625


@pytest.mark.parametrize(
    ("statuses", "pass_rate"),
    [
        ([Status.PASS, Status.PASS, Status.FAIL, Status.FAIL], 0.5),
        ([Status.PASS, Status.PASS, Status.PASS, Status.FAIL], 0.75),
        ([Status.FAIL], 0.0),
        ([Status.PASS], 1.0),
    ],
)
def test_pass_rate_is_passed_over_scored(statuses: list[Status], pass_rate: float) -> None:
    cases = [evidence_of(s, 1.0 if s is Status.PASS else 0.0) for s in statuses]
    assert tally(cases).pass_rate == pass_rate


@pytest.mark.parametrize(
    "cases",
    [[], [evidence_of(Status.SKIPPED, None)], [evidence_of(Status.SKIPPED, None)] * 3],
)
def test_pass_rate_and_score_are_none_when_nothing_was_scored(cases: list[CaseEvidence]) -> None:
    metrics = tally(cases)
    assert metrics.scored == 0
    assert metrics.pass_rate is None
    assert metrics.score is None


def test_run_score_is_mean_case_score_over_scored_cases() -> None:
    metrics = tally(
        [
            evidence_of(Status.PASS, 1.0),
            evidence_of(Status.FAIL, 0.5),
            evidence_of(Status.FAIL, 0.0),
            evidence_of(Status.SKIPPED, None),
        ]
    )
    assert metrics.score == pytest.approx(0.5)


def test_merge_adds_every_count() -> None:
    first = tally([evidence_of(Status.PASS, 1.0), evidence_of(Status.SKIPPED, None)])
    second = tally(
        [
            evidence_of(Status.FAIL, 0.0, missing=True),
            evidence_of(Status.ERROR, 0.5),
            evidence_of(Status.PASS, 1.0),
        ]
    )
    first.merge(second)
    assert first.model_dump() == {
        "cases": 5,
        "scored": 4,
        "passed": 2,
        "failed": 2,
        "skipped": 1,
        "missing": 1,
        "errors": 1,
        "incomplete": 1,
        "not_judged": 0,
        "skipped_checks": 0,
        "judge_calls": 0,
        "judge_cache_hits": 0,
        "judge_cost_usd": 0.0,
        "judged_checks": 0,
        "judged_checks_passed": 0,
        "repeated_checks": 0,
        "unanimous_checks": 0,
        "split_checks": 0,
        "judge_calls_over_bound": 0,
        "write_guard": None,  # set by the store when the run finishes, never summed
        "checks_by_kind": {},
        "unavailable": {},
    }
    assert first.score == pytest.approx(2.5 / 4)
    assert first.pass_rate == 0.5


def test_checks_are_tallied_by_kind_and_merged() -> None:
    compiled = CompiledSuite.compile(
        make_suite(case("a", {"contains": "refund"}, "json_valid"), case("b", {"contains": "x"}))
    )
    first = tally(score_outputs(compiled, [output("a", "a refund")], HASHER))
    second = tally(score_outputs(compiled, [output("b", "x")], HASHER))
    first.merge(second)
    kinds = {kind: (t.passed, t.scored) for kind, t in first.checks_by_kind.items()}
    assert kinds == {"contains": (2, 2), "json_valid": (0, 1)}


def test_merge_of_chunks_equals_tally_of_all() -> None:
    cases = [
        evidence_of(Status.PASS, 1.0),
        evidence_of(Status.FAIL, 0.25),
        evidence_of(Status.SKIPPED, None),
        evidence_of(Status.FAIL, 0.0, missing=True),
        evidence_of(Status.PASS, 1.0),
    ]
    merged = RunMetrics()
    for chunk in (cases[:2], cases[2:3], cases[3:]):
        merged.merge(tally(chunk))
    whole = tally(cases)
    assert merged.model_dump() == whole.model_dump()
    assert merged.score == whole.score


# --- seeded sampling ------------------------------------------------------------------------

HUNDRED = [f"case-{n:03d}" for n in range(100)]


def test_sampling_is_reproducible_for_the_same_seed() -> None:
    first = select_cases(HUNDRED, 10, seed=7)
    assert len(first) == 10
    assert len(set(first)) == 10
    assert select_cases(HUNDRED, 10, seed=7) == first


def test_sampling_differs_for_a_different_seed() -> None:
    assert select_cases(HUNDRED, 10, seed=7) != select_cases(HUNDRED, 10, seed=8)


def test_sampling_keeps_suite_order() -> None:
    shuffled = HUNDRED[::-1]
    chosen = select_cases(shuffled, 20, seed=3)
    assert chosen == [c for c in shuffled if c in set(chosen)]
    assert set(chosen) <= set(HUNDRED)


def test_sampling_does_not_depend_on_suite_order() -> None:
    forward = select_cases(HUNDRED, 15, seed=11)
    backward = select_cases(HUNDRED[::-1], 15, seed=11)
    assert set(forward) == set(backward)


@pytest.mark.parametrize("sample", [None, 100, 101, 10_000])
def test_sampling_returns_all_cases_when_sample_covers_the_suite(sample: int | None) -> None:
    assert select_cases(HUNDRED, sample, seed=1) == HUNDRED


@pytest.mark.parametrize("sample", [0, -1])
def test_a_non_positive_sample_is_refused_by_the_run_s_options(sample: int) -> None:
    """The bound is `RunOptions.sample`'s alone (tests/test_run_option_edges.py)."""
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        RunOptions(suite="s", outputs="o.jsonl", sample=sample)  # type: ignore[arg-type]


# --- evidence of every combination of check outcomes ----------------------------------------

OUTCOMES = {
    "pass": Outcome(Status.PASS, 1.0),
    "half": Outcome(Status.PASS, 0.5),
    "fail": Outcome(Status.FAIL, 0.0, "missing refund"),
    "error": Outcome(Status.ERROR, 0.0, "error"),
    "left-out": Outcome(Status.SKIPPED, 0.0, NO_JUDGE),
    "unscored": Outcome(Status.SKIPPED, 0.0, "judge error"),
}


def _expected(names: tuple[str, ...]) -> tuple[Status, float | None, bool]:
    """The SPEC §5 case rule, read independently: (status, score, not judged)."""
    scored = [OUTCOMES[n] for n in names if OUTCOMES[n].status is not Status.SKIPPED]
    mean = sum(o.score for o in scored) / len(scored) if scored else None
    if any(o.status is Status.ERROR for o in scored):
        return Status.ERROR, mean, False
    if any(o.status is Status.FAIL for o in scored):
        return Status.FAIL, mean, False
    if "unscored" in names:
        return Status.SKIPPED, None, False
    if not scored:
        return Status.SKIPPED, None, bool(names)
    return Status.PASS, mean, False


@pytest.mark.parametrize("count", [0, 1, 2, 3])
def test_every_combination_of_check_outcomes_follows_the_case_rule(count: int) -> None:
    for names in itertools.product(OUTCOMES, repeat=count):
        scorers = tuple(
            Scorer(f"kind{k}", f"check {k}", lambda text: Outcome(Status.PASS, 1.0))
            for k in range(count)
        )
        judged = {("c", k): OUTCOMES[name] for k, name in enumerate(names)}
        evidence = score_case("c", scorers, output("c", CANARY), HASHER, judged)
        assert (evidence.status, evidence.score, evidence.not_judged) == _expected(names), names
        assert [(c.scorer, c.kind, c.status, c.score, c.reason) for c in evidence.checks] == [
            (f"check {k}", f"kind{k}", OUTCOMES[n].status, OUTCOMES[n].score, OUTCOMES[n].reason)
            for k, n in enumerate(names)
        ]
        assert CANARY not in evidence.model_dump_json()


def test_evidence_bytes_of_a_failed_and_an_incomplete_case() -> None:
    scorers = tuple(Scorer(f"kind{k}", f"check {k}", lambda text: OUTCOMES["pass"]) for k in "ab")
    failed = score_case(
        "c", scorers, output("c", "text"), HASHER, {("c", 0): OUTCOMES["fail"]}
    ).model_dump_json()
    mac = HASHER("text")
    assert failed == (
        '{"case_id":"c","status":"fail","score":0.5,"missing":false,"not_judged":false,'
        f'"output_hmac":"{mac}","label":"check a: missing refund",'
        '"checks":[{"scorer":"check a","status":"fail","score":0.0,"kind":"kinda",'
        '"reason":"missing refund"},{"scorer":"check b","status":"pass","score":1.0,'
        '"kind":"kindb","reason":""}]}'
    )
    judged = {("c", 0): OUTCOMES["unscored"], ("c", 1): OUTCOMES["left-out"]}
    incomplete = score_case("c", scorers, output("c", "text"), HASHER, judged)
    assert incomplete.label == (
        "incomplete: 1 check not scored; 2 skipped (judge error, no judge configured)"
    )


def test_merge_adds_unavailable_checks_by_kind_and_reason() -> None:
    first = RunMetrics(unavailable={"tool_errors: OpenAI messages cannot mark a failed call": 2})
    second = RunMetrics(
        unavailable={
            "tool_errors: OpenAI messages cannot mark a failed call": 3,
            "contains: the trace captured no output text (content capture off?)": 1,
        }
    )
    first.merge(second)
    assert first.unavailable == {
        "tool_errors: OpenAI messages cannot mark a failed call": 5,
        "contains: the trace captured no output text (content capture off?)": 1,
    }
