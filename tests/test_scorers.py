"""Scorer families (SPEC §5): behaviour, canonical specs, redacted labels, linear-time regex."""

from __future__ import annotations

import time
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from assay.scorers import LABEL_LIMIT, Outcome, Scorer, ScorerSpec, Status, scorer_names

CANARY = "CANARY-7f3a9c-secret-output"


def build(raw: Any) -> Scorer:
    """Validate a scorer exactly as a suite would and compile it."""
    return ScorerSpec.model_validate(raw).build()


def check(raw: Any, output: str) -> Outcome:
    return build(raw)(output)


def passes(raw: Any, output: str) -> bool:
    outcome = check(raw, output)
    assert outcome.status in (Status.PASS, Status.FAIL), outcome
    return outcome.status is Status.PASS


# --- outcome shape --------------------------------------------------------------------------


def test_pass_outcome_has_score_one_and_fail_outcome_has_score_zero() -> None:
    assert check({"contains": "refund"}, "a refund") == Outcome(Status.PASS, 1.0, "")
    failed = check({"contains": "refund"}, "nothing here")
    assert failed.status is Status.FAIL
    assert failed.score == 0.0
    assert failed.reason == "missing"


def test_every_builtin_family_is_registered() -> None:
    assert scorer_names() == [
        "contains",
        "exact",
        "json_equal",
        "json_valid",
        "llm_judge",
        "max_tool_calls",
        "max_turns",
        "not_contains",
        "numeric_range",
        "regex",
        "tool_called",
        "tool_errors",
        "tool_not_called",
        "trajectory",
        "trajectory_precision",
        "trajectory_recall",
    ]


# --- exact ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "output", "expected"),
    [
        ({"exact": "yes"}, "yes", True),
        ({"exact": "yes"}, "  yes \n", True),  # strip defaults to true
        ({"exact": {"value": "yes", "strip": False}}, "  yes \n", False),
        ({"exact": {"value": "yes", "strip": False}}, "yes", True),
        ({"exact": "yes"}, "YES", False),  # case_sensitive defaults to true
        ({"exact": {"value": "yes", "case_sensitive": False}}, " YeS ", True),
        ({"exact": "yes"}, "yes!", False),
        ({"exact": "yes"}, "yes yes", False),
    ],
)
def test_exact(raw: Any, output: str, expected: bool) -> None:
    assert passes(raw, output) is expected


def test_exact_failure_reason_is_differs() -> None:
    assert check({"exact": "yes"}, "no").reason == "differs"


# --- contains / not_contains ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "output", "expected"),
    [
        ({"contains": "refund"}, "Your refund is on its way", True),
        ({"contains": "refund"}, "Your REFUND is on its way", False),
        ({"contains": {"value": "refund"}}, "Your refund is on its way", True),
        ({"contains": {"value": "refund", "case_sensitive": False}}, "Your REFUND", True),
        ({"contains": {"value": "REFUND", "case_sensitive": False}}, "your refund", True),
        ({"contains": {"value": "refund", "case_sensitive": False}}, "no money back", False),
        ({"not_contains": "guarantee"}, "no promises", True),
        ({"not_contains": "guarantee"}, "we guarantee it", False),
        ({"not_contains": "guarantee"}, "we GUARANTEE it", True),
        ({"not_contains": {"value": "guarantee", "case_sensitive": False}}, "GUARANTEE", False),
        ({"not_contains": {"value": "guarantee", "case_sensitive": False}}, "no promises", True),
    ],
)
def test_contains_and_not_contains(raw: Any, output: str, expected: bool) -> None:
    assert passes(raw, output) is expected


def test_not_contains_failure_reason_is_present() -> None:
    assert check({"not_contains": "x"}, "x").reason == "present"


# --- regex ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "output", "expected"),
    [
        ({"regex": r"\b30 days\b"}, "within 30 days.", True),
        ({"regex": r"\b30 days\b"}, "within 300 days.", False),
        ({"regex": "refund"}, "REFUND", False),
        ({"regex": {"pattern": "refund", "flags": "i"}}, "REFUND", True),
        ({"regex": "^b$"}, "a\nb\nc", False),
        ({"regex": {"pattern": "^b$", "flags": "m"}}, "a\nb\nc", True),
        ({"regex": "a.b"}, "a\nb", False),
        ({"regex": {"pattern": "a.b", "flags": "s"}}, "a\nb", True),
        ({"regex": {"pattern": "^A.B$", "flags": "ims"}}, "x\na\nb", True),
    ],
)
def test_regex(raw: Any, output: str, expected: bool) -> None:
    assert passes(raw, output) is expected


def test_regex_failure_reason_is_no_match() -> None:
    assert check({"regex": "z"}, "abc").reason == "no match"


def test_regex_catastrophic_backtracking_pattern_finishes_fast_and_fails() -> None:
    scorer = build({"regex": "(a+)+$"})
    started = time.perf_counter()
    outcome = scorer("a" * 30 + "!")
    elapsed = time.perf_counter() - started
    assert outcome.status is Status.FAIL
    assert elapsed < 1.0


def test_regex_pathological_pattern_on_one_megabyte_output_finishes_fast() -> None:
    scorer = build({"regex": "(x+x+)+y"})
    output = "x" * 1_000_000
    started = time.perf_counter()
    outcome = scorer(output)
    elapsed = time.perf_counter() - started
    assert outcome.status is Status.FAIL
    assert elapsed < 1.0


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=a)", "(?!a)b", "(?<=a)b", "("])
def test_regex_that_re2_cannot_run_is_rejected_at_validation(pattern: str) -> None:
    with pytest.raises(ValidationError, match="invalid regex"):
        ScorerSpec.model_validate({"regex": pattern})


@pytest.mark.parametrize("flags", ["x", "iu", "I"])
def test_regex_unknown_flag_is_rejected(flags: str) -> None:
    with pytest.raises(ValidationError, match="unknown regex flags"):
        ScorerSpec.model_validate({"regex": {"pattern": "a", "flags": flags}})


# --- json_valid / json_equal ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ('{"a": 1}', True),
        ("[1, 2, 3]", True),
        ('"text"', True),
        ("42", True),
        ("null", True),
        ("{'a': 1}", False),
        ('{"a": 1', False),
        ("", False),
        ("not json", False),
    ],
)
def test_json_valid(output: str, expected: bool) -> None:
    assert passes("json_valid", output) is expected


@pytest.mark.parametrize("output", ["NaN", "Infinity", '{"a": -Infinity}'])
def test_json_valid_rejects_non_standard_constants(output: str) -> None:
    assert passes("json_valid", output) is False


@pytest.mark.parametrize(
    ("value", "output", "expected"),
    [
        ({"a": 1, "b": 2}, '{"b": 2, "a": 1}', True),  # key order ignored
        ({"a": True}, '{"a": 1}', False),  # true is not 1
        ({"a": 1}, '{"a": true}', False),
        ({"a": False}, '{"a": 0}', False),
        ({"a": 1}, '{"a": 1.0}', True),  # 1 equals 1.0
        ({"a": 1.5}, '{"a": 1.5}', True),
        ({"a": [1, [2, {"x": "y", "z": None}]]}, '{"a": [1, [2, {"z": null, "x": "y"}]]}', True),
        ({"a": [1, [2, 3]]}, '{"a": [1, [3, 2]]}', False),  # list order matters
        ({"a": [1, 2]}, '{"a": [1, 2, 3]}', False),
        ({"a": 1}, '{"a": 1, "b": 2}', False),  # extra key
        ({"a": "1"}, '{"a": 1}', False),  # string is not number
        ({"a": None}, '{"a": 0}', False),
        ("yes", '"yes"', True),
    ],
)
def test_json_equal(value: Any, output: str, expected: bool) -> None:
    assert passes({"json_equal": {"value": value}}, output) is expected


def test_json_equal_on_invalid_json_fails_with_reason() -> None:
    outcome = check({"json_equal": {"value": {"a": 1}}}, "{a: 1}")
    assert outcome.status is Status.FAIL
    assert outcome.reason == "not valid JSON"


def test_json_equal_requires_full_form() -> None:
    with pytest.raises(ValidationError, match="takes its options as a mapping"):
        ScorerSpec.model_validate({"json_equal": 5})


# --- numeric_range --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "bounds", "expected"),
    [
        ("The total is $1,234.50 today", {"min": 1234.5, "max": 1234.5}, True),
        ("The total is $1,234.50 today", {"min": 1234.6}, False),
        ("It is -12.5 degrees", {"min": -13, "max": -12}, True),
        ("It is -12.5 degrees", {"min": 0}, False),
        ("first 3 then 100", {"max": 5}, True),  # the first number is used
        ("exactly 10", {"min": 10, "max": 20}, True),  # inclusive min
        ("exactly 20", {"min": 10, "max": 20}, True),  # inclusive max
        ("just 9.99", {"min": 10, "max": 20}, False),
        ("just 20.01", {"min": 10, "max": 20}, False),
        ("1e3 units", {"min": 1000, "max": 1000}, True),
    ],
)
def test_numeric_range_reads_first_number_in_text(
    output: str, bounds: dict[str, float], expected: bool
) -> None:
    assert passes({"numeric_range": bounds}, output) is expected


def test_numeric_range_without_a_number_fails() -> None:
    outcome = check({"numeric_range": {"min": 0}}, "no digits at all")
    assert outcome.status is Status.FAIL
    assert outcome.reason == "no number"


@pytest.mark.parametrize(
    ("path", "output", "expected"),
    [
        ("amount", '{"amount": 42}', True),
        ("amount", '{"amount": 420}', False),
        ("amount", '{"amount": "42.50"}', True),  # numeric string at the path
        ("amount", '{"amount": "1,000"}', False),  # 1000 > max
        ("items.0.price", '{"items": [{"price": 10}, {"price": 999}]}', True),
        ("items.1.price", '{"items": [{"price": 10}, {"price": 999}]}', False),
        ("a.b", '{"a": {"b": 50}}', True),
    ],
)
def test_numeric_range_reads_value_at_json_path(path: str, output: str, expected: bool) -> None:
    raw = {"numeric_range": {"min": 0, "max": 100, "path": path}}
    assert passes(raw, output) is expected


@pytest.mark.parametrize(
    ("path", "output", "reason"),
    [
        ("amount", '{"total": 42}', "path not found"),
        ("items.5.price", '{"items": [{"price": 10}]}', "path not found"),
        ("items.x", '{"items": [1, 2]}', "path not found"),
        ("amount.value", '{"amount": 5}', "path not found"),
        ("amount", '{"amount": 42', "not valid JSON"),
        ("amount", "the amount is 42", "not valid JSON"),
        ("amount", '{"amount": "lots"}', "not a number"),
        ("amount", '{"amount": true}', "not a number"),
        ("amount", '{"amount": null}', "not a number"),
        ("amount", '{"amount": [42]}', "not a number"),
    ],
)
def test_numeric_range_path_failures(path: str, output: str, reason: str) -> None:
    outcome = check({"numeric_range": {"min": 0, "max": 100, "path": path}}, output)
    assert outcome.status is Status.FAIL
    assert outcome.reason == reason


def test_numeric_range_rejects_non_finite_value_at_path() -> None:
    outcome = check({"numeric_range": {"min": 0, "path": "amount"}}, '{"amount": Infinity}')
    assert outcome.status is Status.FAIL


def test_numeric_range_min_greater_than_max_is_rejected() -> None:
    with pytest.raises(ValidationError, match="greater than max"):
        ScorerSpec.model_validate({"numeric_range": {"min": 10, "max": 1}})


@pytest.mark.parametrize("raw", ["numeric_range", {"numeric_range": {}}, {"numeric_range": None}])
def test_numeric_range_without_bounds_is_rejected(raw: Any) -> None:
    with pytest.raises(ValidationError, match="needs min, max or both"):
        ScorerSpec.model_validate(raw)


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a."])
def test_numeric_range_path_with_empty_segment_is_rejected(path: str) -> None:
    with pytest.raises(ValidationError, match="empty segment"):
        ScorerSpec.model_validate({"numeric_range": {"min": 0, "path": path}})


# --- llm_judge ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [{"llm_judge": "Is polite"}, {"llm_judge": {"rubric": "Is polite", "pass_threshold": 0.7}}],
)
def test_llm_judge_without_judge_is_skipped(raw: Any) -> None:
    outcome = check(raw, "Thank you kindly")
    assert outcome.status is Status.SKIPPED
    assert outcome.reason == "no judge configured"


def test_llm_judge_pass_threshold_out_of_range_is_rejected() -> None:
    with pytest.raises(ValidationError):
        ScorerSpec.model_validate({"llm_judge": {"rubric": "r", "pass_threshold": 1.5}})


# --- specs: shorthand, canonical key, validation --------------------------------------------


@pytest.mark.parametrize(
    ("shorthand", "full"),
    [
        ({"exact": "yes"}, {"exact": {"value": "yes", "strip": True, "case_sensitive": True}}),
        ({"contains": "refund"}, {"contains": {"value": "refund", "case_sensitive": True}}),
        ({"not_contains": "x"}, {"not_contains": {"value": "x"}}),
        ({"regex": "a+"}, {"regex": {"pattern": "a+", "flags": ""}}),
        ("json_valid", {"json_valid": {}}),
        ("json_valid", {"json_valid": None}),
        ({"llm_judge": "polite"}, {"llm_judge": {"rubric": "polite", "pass_threshold": None}}),
        ({"regex": {"pattern": "a", "flags": "si"}}, {"regex": {"pattern": "a", "flags": "is"}}),
    ],
)
def test_shorthand_and_full_form_have_the_same_key(shorthand: Any, full: Any) -> None:
    assert ScorerSpec.model_validate(shorthand).key == ScorerSpec.model_validate(full).key


def test_key_identifies_the_full_form_with_defaults_filled() -> None:
    spec = ScorerSpec.model_validate({"contains": "refund"})
    explicit = ScorerSpec.model_validate({"contains": {"case_sensitive": True, "value": "refund"}})
    assert spec.key == explicit.key
    assert spec.model_dump() == {"contains": {"value": "refund", "case_sensitive": True}}


def test_identical_entries_share_one_spec_but_types_stay_exact() -> None:
    first = ScorerSpec.model_validate({"exact": "1"})
    assert ScorerSpec.model_validate({"exact": "1"}) is first
    assert ScorerSpec.model_validate({"json_equal": {"value": True}}).key != (
        ScorerSpec.model_validate({"json_equal": {"value": 1}}).key
    )


def test_different_configurations_have_different_keys() -> None:
    a = ScorerSpec.model_validate({"contains": "refund"})
    b = ScorerSpec.model_validate({"contains": {"value": "refund", "case_sensitive": False}})
    assert a.key != b.key


def test_type_adapter_validates_a_list_of_mixed_specs() -> None:
    specs = TypeAdapter(list[ScorerSpec]).validate_python(
        ["json_valid", {"contains": "a"}, {"numeric_range": {"min": 1}}]
    )
    assert [s.name for s in specs] == ["json_valid", "contains", "numeric_range"]


def test_unknown_scorer_is_rejected_listing_known_scorers() -> None:
    with pytest.raises(ValidationError) as info:
        ScorerSpec.model_validate({"similarity": "x"})
    message = str(info.value)
    assert "unknown scorer 'similarity'" in message
    for name in scorer_names():
        assert name in message


@pytest.mark.parametrize(
    "raw", [{"contains": "a", "regex": "b"}, {}, 5, ["contains", "a"], {"contains": ["a"]}]
)
def test_malformed_scorer_entry_is_rejected(raw: Any) -> None:
    with pytest.raises(ValidationError):
        ScorerSpec.model_validate(raw)


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"contains\.colour"):
        ScorerSpec.model_validate({"contains": {"value": "a", "colour": "red"}})


# --- redaction: labels and reasons never carry output text, labels are short ----------------

LONG = "v" * 500

EVERY_FAMILY_LONG_CONFIG: list[Any] = [
    {"exact": LONG},
    {"contains": LONG},
    {"not_contains": LONG},
    {"regex": LONG},
    {"json_equal": {"value": {"key": LONG, "list": [LONG, LONG]}}},
    {"numeric_range": {"min": 0, "max": 1, "path": ".".join([LONG] * 3)}},
    {"llm_judge": LONG},
    "json_valid",
]


@pytest.mark.parametrize("raw", EVERY_FAMILY_LONG_CONFIG)
def test_label_is_clamped_to_limit_for_long_configuration(raw: Any) -> None:
    scorer = build(raw)
    assert LABEL_LIMIT == 120
    assert 0 < len(scorer.label) <= LABEL_LIMIT


@pytest.mark.parametrize("raw", EVERY_FAMILY_LONG_CONFIG)
def test_label_starts_with_the_scorer_name(raw: Any) -> None:
    scorer = build(raw)
    assert scorer.label.startswith(scorer.name)


EVERY_FAMILY: list[Any] = [
    {"exact": "yes"},
    {"exact": {"value": "yes", "case_sensitive": False}},
    {"contains": "refund"},
    {"not_contains": "CANARY"},
    {"regex": r"\d{5}"},
    {"regex": {"pattern": "canary", "flags": "i"}},
    "json_valid",
    {"json_equal": {"value": {"a": 1}}},
    {"numeric_range": {"min": 0, "max": 1}},
    {"numeric_range": {"min": 0, "max": 1, "path": "a.b"}},
    {"llm_judge": "polite"},
]

CANARY_OUTPUTS = [
    f"prefix {CANARY} suffix",
    f'{{"a": "{CANARY}"}}',
    f'{{"a": {{"b": "{CANARY}"}}}}',
    f"{CANARY} 12345 and 7",
    CANARY,
]


@pytest.mark.parametrize("raw", EVERY_FAMILY)
@pytest.mark.parametrize("output", CANARY_OUTPUTS)
def test_label_and_reason_never_contain_output_text(raw: Any, output: str) -> None:
    scorer = build(raw)
    outcome = scorer(output)
    assert CANARY not in scorer.label
    assert CANARY not in outcome.reason
    assert "7f3a9c" not in outcome.reason


def test_scorer_that_raises_reports_error_without_output_text() -> None:
    def broken(output: str) -> Outcome:
        raise RuntimeError(output)

    outcome = Scorer("broken", "broken", broken)(CANARY)
    assert outcome.status is Status.ERROR
    assert outcome.score == 0.0
    assert outcome.reason == "scorer error (RuntimeError)"
    assert CANARY not in outcome.reason
