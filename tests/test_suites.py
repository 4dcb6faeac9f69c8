"""Suite loading, validation errors (file + line), defaults and content addressing (SPEC §3)."""

from __future__ import annotations

import gc
import hashlib
import json
import tracemalloc
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
from pydantic import ValidationError

from assay.errors import InputError
from assay.runs.scoring import CompiledSuite
from assay.suites.suite import Suite, load_published, load_suite, parse_suite

VALID_YAML = dedent(
    """\
    suite: refunds
    description: Refund-policy answers
    pass_threshold: 0.75
    regression_threshold: 0.1
    defaults:
      - contains: refund
    cases:
      - id: window-40-days
        input: "Can I return shoes after 40 days?"
        expected: "No. Returns are accepted within 30 days."
        query_class: returns
        tags: [returns]
        scorers:
          - regex: '\\b30 days\\b'
          - not_contains: {value: guarantee, case_sensitive: false}
          - llm_judge: {rubric: "Says returns close after 30 days."}
      - id: uses-defaults
        input: "Do you refund?"
    """
)


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def load_error(tmp_path: Path, name: str, content: str | bytes) -> InputError:
    path = write(tmp_path, name, content)
    with pytest.raises(InputError) as info:
        load_suite(path)
    error = info.value
    assert error.source == str(path)
    assert name in str(error)
    return error


# --- valid suites ---------------------------------------------------------------------------


def test_valid_yaml_suite_loads_with_all_fields(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, "refunds.yaml", VALID_YAML))
    assert suite.suite == "refunds"
    assert suite.description == "Refund-policy answers"
    assert suite.pass_threshold == 0.75
    assert suite.regression_threshold == 0.1
    assert [c.id for c in suite.cases] == ["window-40-days", "uses-defaults"]
    first = suite.cases[0]
    assert first.input == "Can I return shoes after 40 days?"
    assert first.expected == "No. Returns are accepted within 30 days."
    assert first.query_class == "returns"
    assert first.tags == ["returns"]
    assert [s.name for s in first.scorers] == ["regex", "not_contains", "llm_judge"]
    assert first.scorers[0].config.pattern == r"\b30 days\b"  # type: ignore[attr-defined]


def test_valid_json_suite_loads(tmp_path: Path) -> None:
    document = {
        "suite": "orders",
        "defaults": ["json_valid"],
        "cases": [
            {"id": "o1", "input": "total?", "scorers": [{"numeric_range": {"min": 0}}]},
            {"id": "o2", "input": "status?"},
        ],
    }
    suite = load_suite(write(tmp_path, "orders.json", json.dumps(document, indent=2)))
    assert suite.suite == "orders"
    assert [c.id for c in suite.cases] == ["o1", "o2"]
    assert suite.pass_threshold == 0.8  # default
    assert suite.regression_threshold == 0.05  # default


def test_yml_extension_is_parsed_as_yaml(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, "refunds.yml", VALID_YAML))
    assert suite.suite == "refunds"


def test_defaults_apply_only_to_cases_without_scorers(tmp_path: Path) -> None:
    suite = load_suite(write(tmp_path, "refunds.yaml", VALID_YAML))
    own, defaulted = suite.cases
    assert [s.name for s in suite.scorers_for(own)] == ["regex", "not_contains", "llm_judge"]
    assert [s.key for s in suite.scorers_for(defaulted)] == [s.key for s in suite.defaults]
    assert [s.name for s in suite.scorers_for(defaulted)] == ["contains"]


def test_parse_suite_accepts_text_directly() -> None:
    suite = parse_suite(VALID_YAML, "inline.yaml")
    assert isinstance(suite, Suite)
    assert len(suite.cases) == 2


# --- errors name file and line --------------------------------------------------------------


def test_malformed_yaml_bad_indentation_names_line(tmp_path: Path) -> None:
    text = "suite: x\ncases:\n  - id: a\n   input: b\n"
    error = load_error(tmp_path, "bad.yaml", text)
    assert error.line == 4
    assert "malformed YAML" in str(error)


def test_malformed_yaml_stray_colon_names_line(tmp_path: Path) -> None:
    text = "suite: x\ndefaults: [json_valid]\ncases:\n  - id: a\n    input: b: c\n"
    error = load_error(tmp_path, "bad.yaml", text)
    assert error.line == 5
    assert "malformed YAML" in str(error)


def test_malformed_yaml_unclosed_quote_names_line_of_the_quote(tmp_path: Path) -> None:
    text = dedent(
        """\
        suite: x
        defaults: [json_valid]
        cases:
          - id: a
            input: 'unclosed
          - id: b
            input: ok
          - id: c
            input: ok
        """
    )
    error = load_error(tmp_path, "bad.yaml", text)
    assert error.line == 5


def test_malformed_json_names_line(tmp_path: Path) -> None:
    text = '{\n  "suite": "x",\n  "cases": [\n    {"id": "a" "input": "b"}\n  ]\n}\n'
    error = load_error(tmp_path, "bad.json", text)
    assert error.line == 4
    assert "malformed JSON" in str(error)


def test_json_file_is_parsed_strictly_as_json(tmp_path: Path) -> None:
    # valid YAML, but not JSON: a .json file must be JSON
    error = load_error(tmp_path, "suite.json", "suite: x\ncases:\n  - id: a\n    input: b\n")
    assert error.line == 1
    assert "malformed JSON" in str(error)


def test_duplicate_case_id_names_line_of_the_second_id(tmp_path: Path) -> None:
    text = dedent(
        """\
        suite: x
        defaults: [json_valid]
        cases:
          - id: a
            input: one
          - id: b
            input: two
          - input: three
            id: a
        """
    )
    error = load_error(tmp_path, "dup.yaml", text)
    assert error.line == 9
    assert error.field == "cases[2].id"
    assert "duplicate case id 'a'" in str(error)


def test_duplicate_case_id_in_json_names_line(tmp_path: Path) -> None:
    document = {
        "suite": "x",
        "defaults": ["json_valid"],
        "cases": [{"id": "a", "input": "1"}, {"id": "a", "input": "2"}],
    }
    text = json.dumps(document, indent=2)
    error = load_error(tmp_path, "dup.json", text)
    lines = text.splitlines()
    second_id_line = [i for i, line in enumerate(lines, start=1) if '"id": "a"' in line][1]
    assert error.line == second_id_line


def test_invalid_regex_names_case_and_line_of_its_scorer(tmp_path: Path) -> None:
    text = dedent(
        """\
        suite: x
        cases:
          - id: fine
            input: a
            scorers: [json_valid]
          - id: backref-case
            input: b
            scorers:
              - contains: ok
              - regex: '(a)\\1'
        """
    )
    error = load_error(tmp_path, "regex.yaml", text)
    assert error.line == 10
    assert "backref-case" in str(error)
    assert "invalid regex" in str(error)
    assert error.field == "cases[1].scorers[1]"


def test_unknown_scorer_names_line_and_known_scorers(tmp_path: Path) -> None:
    text = dedent(
        """\
        suite: x
        cases:
          - id: a
            input: b
            scorers:
              - similarity: 0.9
        """
    )
    error = load_error(tmp_path, "unknown.yaml", text)
    assert error.line == 6
    assert "unknown scorer 'similarity'" in str(error)
    assert "contains" in str(error)


@pytest.mark.parametrize(
    ("text", "line", "field"),
    [
        (
            "suite: x\ndefaults: [json_valid]\ncases:\n  - id: a\n    input: [1, 2]\n",
            5,
            "cases[0].input",
        ),
        (
            "suite: x\npass_threshold: high\ndefaults: [json_valid]\n"
            "cases:\n  - id: a\n    input: b\n",
            2,
            "pass_threshold",
        ),
        (
            "suite: x\ndefaults: [json_valid]\ncases:\n  - id: a\n    input: b\n    tags: oops\n",
            6,
            "cases[0].tags",
        ),
        (
            "suite: Not A Slug\ndefaults: [json_valid]\ncases:\n  - id: a\n    input: b\n",
            1,
            "suite",
        ),
        (
            "suite: x\ndefaults: [json_valid]\ncases:\n  - id: a\n    input: b\n    colour: red\n",
            6,
            "cases[0].colour",
        ),
        (
            "suite: x\npass_threshold: 1.5\ndefaults: [json_valid]\n"
            "cases:\n  - id: a\n    input: b\n",
            2,
            "pass_threshold",
        ),
    ],
)
def test_wrong_field_names_line_and_field(tmp_path: Path, text: str, line: int, field: str) -> None:
    error = load_error(tmp_path, "fields.yaml", text)
    assert error.line == line
    assert error.field == field


def test_wrong_field_type_in_json_suite_names_line(tmp_path: Path) -> None:
    text = dedent(
        """\
        {
          "suite": "x",
          "defaults": ["json_valid"],
          "cases": [
            {"id": "a", "input": "fine"},
            {"id": "b", "input": [1, 2]}
          ]
        }
        """
    )
    error = load_error(tmp_path, "fields.json", text)
    assert error.line == 6
    assert error.field == "cases[1].input"


def test_wrong_field_type_in_tab_indented_json_suite_names_line(tmp_path: Path) -> None:
    text = (
        '{\n\t"suite": "x",\n\t"defaults": ["json_valid"],\n'
        '\t"cases": [\n\t\t{"id": "a", "input": [1]}\n\t]\n}\n'
    )
    error = load_error(tmp_path, "tabs.json", text)
    assert error.line == 5


def test_non_utf8_bytes_name_line_of_the_bad_byte(tmp_path: Path) -> None:
    content = b"suite: x\ndefaults: [json_valid]\ncases:\n  - id: a\n    input: \xff\xfe\n"
    error = load_error(tmp_path, "latin.yaml", content)
    assert error.line == 5
    assert "not UTF-8" in str(error)


def test_empty_suite_is_rejected(tmp_path: Path) -> None:
    error = load_error(tmp_path, "empty.yaml", "suite: x\ndefaults: [json_valid]\ncases: []\n")
    assert error.line == 3
    assert "no cases" in str(error)


def test_missing_cases_key_is_rejected(tmp_path: Path) -> None:
    error = load_error(tmp_path, "nocases.yaml", "suite: x\ndefaults: [json_valid]\n")
    assert error.field == "cases"
    assert error.line == 1


def test_case_without_scorers_and_without_defaults_is_rejected(tmp_path: Path) -> None:
    text = dedent(
        """\
        suite: x
        cases:
          - id: scored
            input: a
            scorers: [json_valid]
          - id: unscored
            input: b
        """
    )
    error = load_error(tmp_path, "noscorers.yaml", text)
    assert error.line == 6
    assert "'unscored'" in str(error)
    assert "no scorers" in str(error)


@pytest.mark.parametrize("text", ["", "- just\n- a list\n", "plain scalar\n"])
def test_document_that_is_not_a_mapping_is_rejected(tmp_path: Path, text: str) -> None:
    error = load_error(tmp_path, "shape.yaml", text)
    assert error.line == 1
    assert "mapping" in str(error)


def test_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as info:
        load_suite(missing)
    assert "nope.yaml" in str(info.value)


# --- content hash ---------------------------------------------------------------------------

SHORTHAND_YAML = dedent(
    """\
    suite: hashes
    defaults:
      - contains: refund
    cases:
      - id: a
        input: first
        scorers:
          - exact: "yes"
          - regex: 'x+'
          - json_valid
      - id: b
        input: second
    """
)

FULL_FORM_JSON = {
    "cases": [
        {
            "scorers": [
                {"exact": {"case_sensitive": True, "strip": True, "value": "yes"}},
                {"regex": {"flags": "", "pattern": "x+"}},
                {"json_valid": {}},
            ],
            "input": "first",
            "id": "a",
            "tags": [],
        },
        {"input": "second", "id": "b", "expected": None},
    ],
    "regression_threshold": 0.05,
    "defaults": [{"contains": {"value": "refund", "case_sensitive": True}}],
    "pass_threshold": 0.8,
    "suite": "hashes",
    "description": "",
}


def test_content_hash_is_a_sha256_address() -> None:
    suite = parse_suite(SHORTHAND_YAML, "s.yaml")
    assert suite.content_hash.startswith("sha256:")
    assert len(suite.content_hash) == len("sha256:") + 64


def test_same_content_in_shorthand_yaml_and_full_form_json_has_same_hash(tmp_path: Path) -> None:
    from_yaml = load_suite(write(tmp_path, "s.yaml", SHORTHAND_YAML))
    from_json = load_suite(write(tmp_path, "s.json", json.dumps(FULL_FORM_JSON)))
    assert from_yaml.content_hash == from_json.content_hash
    assert from_yaml.document() == from_json.document()
    assert [c.content_hash for c in from_yaml.cases] == [c.content_hash for c in from_json.cases]


def test_reordered_keys_give_same_hash() -> None:
    reordered = dedent(
        """\
        cases:
          - scorers:
              - json_valid
              - exact: {case_sensitive: true, value: "yes"}
            input: first
            id: a
        suite: order
        """
    )
    original = dedent(
        """\
        suite: order
        cases:
          - id: a
            input: first
            scorers:
              - json_valid
              - exact: {value: "yes", case_sensitive: true}
        """
    )
    assert (
        parse_suite(reordered, "a.yaml").content_hash
        == parse_suite(original, "b.yaml").content_hash
    )


def test_reordered_scorers_change_the_hash() -> None:
    one = "suite: s\ncases:\n  - id: a\n    input: i\n    scorers: [json_valid, {contains: x}]\n"
    two = "suite: s\ncases:\n  - id: a\n    input: i\n    scorers: [{contains: x}, json_valid]\n"
    assert parse_suite(one, "1.yaml").content_hash != parse_suite(two, "2.yaml").content_hash


def test_changing_one_case_input_changes_suite_hash_and_only_that_case_hash() -> None:
    before = parse_suite(SHORTHAND_YAML, "s.yaml")
    after = parse_suite(SHORTHAND_YAML.replace("input: second", "input: changed"), "s.yaml")
    assert before.content_hash != after.content_hash
    hashes_before = {c.id: c.content_hash for c in before.cases}
    hashes_after = {c.id: c.content_hash for c in after.cases}
    assert hashes_before["a"] == hashes_after["a"]
    assert hashes_before["b"] != hashes_after["b"]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("pass_threshold: 0.8", "pass_threshold: 0.9"),
        ("contains: refund", "contains: refunds"),
        ("regex: 'x+'", "regex: 'y+'"),
    ],
)
def test_changing_suite_settings_changes_the_hash(old: str, new: str) -> None:
    base = "pass_threshold: 0.8\n" + SHORTHAND_YAML
    assert old in base
    changed = base.replace(old, new)
    assert parse_suite(base, "a.yaml").content_hash != parse_suite(changed, "b.yaml").content_hash


def test_canonical_text_is_the_sorted_compact_json_of_the_model_dump(tmp_path: Path) -> None:
    from assay.canonical import canonical_json, content_hash

    suite_file = tmp_path / "s.yaml"
    suite_file.write_text(
        "suite: canon\ndescription: d\ndefaults:\n  - json_equal: {value: {cases: []}}\n"
        "cases:\n  - id: a\n    input: q\n    tags: [x]\n    scorers: [{contains: z}]\n"
        "  - id: b\n    input: r\n"
    )
    suite = load_suite(suite_file)

    assert suite.document() == suite.model_dump(mode="json")
    # fields added later are left out at their defaults, so suites published before them keep
    # their hash
    dumped = suite.model_dump(mode="json")
    assert dumped.pop("min_coverage") == 0.95
    assert dumped.pop("trials") is None and dumped.pop("non_inferiority_margin") is None
    assert dumped.pop("primary_comparison") is False
    assert suite.canonical.text == canonical_json(dumped)
    assert suite.canonical.case_hashes == {
        case.id: content_hash(case.model_dump(mode="json")) for case in suite.cases
    }


# --- published suites: validated a batch of cases at a time ---------------------------------


def _many_cases(count: int) -> str:
    """A JSON suite like the scale benchmark's: each case has its own `numeric_range` bounds;
    a few add tags, a cluster, an expected trajectory, text that JSON must escape, or fall back
    to the defaults."""
    cases: list[dict[str, Any]] = []
    for index in range(count):
        case: dict[str, Any] = {
            "id": f"case-{index:05d}",
            "input": f'Order {index}: "refund" é ✓ \\ {index * 7}',
            "expected": f"Confirms ${index}.50",
            "scorers": [
                {"contains": "refund"},
                {"regex": r"\border \d+\b"},
                {"numeric_range": {"min": index, "max": index + 1.5}},
            ],
        }
        if index % 97 == 0:
            case.update(tags=["slow", "en"], cluster=f"doc-{index % 3}", query_class="billing")
        if index % 101 == 0:
            case["expected_trajectory"] = [{"tool": "refund", "args": {"order_id": index}}]
            case["scorers"].append({"trajectory_recall": 0.5})
        if index % 89 == 0:
            del case["scorers"]
        cases.append(case)
    document = {
        "suite": "many",
        "defaults": [{"not_contains": "guarantee"}],
        "trials": {"min": 2, "case_passes": "majority"},
        "non_inferiority_margin": 0.05,
        "cases": cases,
    }
    return json.dumps(document)


def _published(suite: Suite) -> tuple[bytes, str]:
    text = suite.canonical.text.encode()
    return text, "sha256:" + hashlib.sha256(text).hexdigest()


def test_a_published_suite_loads_as_it_was_parsed() -> None:
    parsed = parse_suite(_many_cases(2_345), "many.json")  # more than two batches of cases
    loaded = load_published(*_published(parsed), "store/many.json")
    assert loaded.canonical.text == parsed.canonical.text
    assert loaded.content_hash == parsed.content_hash
    assert loaded.canonical.case_hashes == parsed.canonical.case_hashes
    assert loaded == parsed
    assert loaded.cases[101].reference == parsed.cases[101].reference is not None


def test_a_case_whose_own_data_looks_like_a_case_boundary_still_loads() -> None:
    """Cases are cut where `},{"expected":` follows; a json_equal value holding those very
    characters is cut in the wrong place, which is not JSON, and loads through `parse_suite`."""
    document = json.loads(_many_cases(1_500))
    tricky = {"json_equal": {"value": [{"a": 1}, {"expected": 2}, {"cluster": 3}]}}
    document["cases"][3]["scorers"] = [tricky]
    document["cases"][1_200]["scorers"] = [tricky]
    parsed = parse_suite(json.dumps(document), "tricky.json")
    assert '},{"expected":2}' in parsed.canonical.text
    loaded = load_published(*_published(parsed), "store/tricky.json")
    assert loaded == parsed and loaded.canonical.text == parsed.canonical.text


def test_a_published_text_in_another_key_order_still_loads() -> None:
    parsed = parse_suite(VALID_YAML, "refunds.yaml")
    text = json.dumps({"suite": "refunds", **parsed.document()}).encode()  # `suite` first
    loaded = load_published(text, "sha256:" + hashlib.sha256(text).hexdigest(), "s.json")
    assert loaded.content_hash == parsed.content_hash


def test_a_published_text_that_no_longer_validates_names_line_and_field() -> None:
    parsed = parse_suite(VALID_YAML, "refunds.yaml")
    text = parsed.canonical.text.replace('"not_contains"', '"not_there"').encode()
    with pytest.raises(InputError) as info:
        load_published(text, "sha256:" + hashlib.sha256(text).hexdigest(), "store/x.json")
    assert info.value.line == 1
    assert info.value.field == "cases[0].scorers[1]"
    assert "unknown scorer 'not_there'" in info.value.problem


def test_validated_cases_and_scorers_share_one_set_of_given_fields() -> None:
    suite = parse_suite(_many_cases(3), "many.json")
    first, second = suite.cases[1], suite.cases[2]
    assert first.model_fields_set is second.model_fields_set
    ranges = [case.scorers[2] for case in (first, second)]
    assert ranges[0] is not ranges[1]  # each case has its own bounds
    assert ranges[0].model_fields_set is ranges[1].model_fields_set
    assert ranges[0].config.model_fields_set is ranges[1].config.model_fields_set
    with pytest.raises(ValidationError, match="frozen"):
        first.cluster = "x"  # type: ignore[misc]
    copied = first.model_copy(update={"cluster": "x"})
    assert "cluster" in copied.model_fields_set
    assert "cluster" not in second.model_fields_set


def test_a_published_suite_keeps_less_than_2_kib_a_case_in_memory() -> None:
    """A case of the scale benchmark (3 checks, its own `numeric_range`) held about 3.7 KiB of
    Python objects once loaded and compiled: its models each with their own set of given
    fields, and a compiled scorer per case. Measured with tracemalloc, what stays allocated."""
    count = 5_000
    text, digest = _published(parse_suite(_many_cases(count), "many.json"))
    gc.collect()
    tracemalloc.start()
    try:
        suite = load_published(text, digest, "store/many.json")
        compiled = CompiledSuite.compile(suite)
        gc.collect()
        kept, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(compiled.cases) == count
    assert kept / count < 2_048
