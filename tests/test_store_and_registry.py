"""File evidence store, suite registry (publish / resolve) and keyed output hashes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from assay.errors import EvidenceConflictError, InputError, NotFoundError
from assay.hashing import SECRET_ENV, SECRET_KEY, OutputHasher, store_secret
from assay.process_state import reset_process_state
from assay.schemes import open_store
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import Suite, parse_suite

# --- FileStore ------------------------------------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> FileStore:
    return FileStore(tmp_path / "store")


def test_put_once_writes_the_object(store: FileStore) -> None:
    assert store.put_once("runs/r1/cases/000000.json", b"evidence") is True
    assert store.get("runs/r1/cases/000000.json") == b"evidence"
    assert store.exists("runs/r1/cases/000000.json")
    assert (store.root / "runs" / "r1" / "cases" / "000000.json").read_bytes() == b"evidence"


def test_put_once_identical_rewrite_returns_false(store: FileStore) -> None:
    store.put_once("a/b.json", b"same")
    assert store.put_once("a/b.json", b"same") is False
    assert store.get("a/b.json") == b"same"


def test_put_once_different_content_conflicts_and_keeps_original(store: FileStore) -> None:
    store.put_once("a/b.json", b"original")
    with pytest.raises(EvidenceConflictError, match=r"a/b\.json"):
        store.put_once("a/b.json", b"tampered")
    assert store.get("a/b.json") == b"original"
    assert list(store.list("a/")) == ["a/b.json"]  # no temp file left behind


def test_put_once_if_absent_keeps_first_writer(store: FileStore) -> None:
    assert store.put_once_if_absent("k", b"first") is True
    assert store.put_once_if_absent("k", b"second") is False
    assert store.get("k") == b"first"


def test_put_replaces_mutable_object(store: FileStore) -> None:
    store.put("runs/r1/aggregate.json", b"v1")
    store.put("runs/r1/aggregate.json", b"v2")
    assert store.get("runs/r1/aggregate.json") == b"v2"


def test_get_missing_raises_not_found(store: FileStore) -> None:
    with pytest.raises(NotFoundError, match=r"nothing/here\.json"):
        store.get("nothing/here.json")
    assert store.exists("nothing/here.json") is False


def test_list_is_sorted_and_recursive(store: FileStore) -> None:
    for key in ["p/c.json", "p/a.json", "p/sub/b.json", "q/z.json", "p/b.json"]:
        store.put_once(key, b"x")
    assert list(store.list("p/")) == ["p/a.json", "p/b.json", "p/c.json", "p/sub/b.json"]
    assert list(store.list("p")) == ["p/a.json", "p/b.json", "p/c.json", "p/sub/b.json"]
    assert list(store.list("")) == [
        "p/a.json",
        "p/b.json",
        "p/c.json",
        "p/sub/b.json",
        "q/z.json",
    ]


def test_list_excludes_temp_files(store: FileStore) -> None:
    store.put_once("p/a.json", b"x")
    (store.root / "p" / ".tmp-abc123").write_bytes(b"half written")
    assert list(store.list("p/")) == ["p/a.json"]


def test_list_of_absent_prefix_is_empty(store: FileStore) -> None:
    assert list(store.list("nothing/")) == []


def test_list_starting_takes_a_prefix_that_ends_inside_a_name(store: FileStore) -> None:
    ours = ["d/run-1-000000.json", "d/run-1-000001-pab.json", "d/run-1-x/deeper.json"]
    others = ["d/run-10-000000.json", "d/run-2-000000.json", "e/run-1-000000.json", "d/sub/r.json"]
    for key in others + ours:
        store.put_once(key, b"x")
    (store.root / "d" / ".tmp-run-1-abc").write_bytes(b"half written")

    assert list(store.list_starting("d/run-1-")) == sorted(ours)
    assert list(store.list_starting("d/run-1-000000.json")) == ["d/run-1-000000.json"]
    assert list(store.list_starting("d/")) == list(store.list("d/"))  # a folder: as `list`
    assert list(store.list_starting("")) == list(store.list(""))
    assert list(store.list_starting("nothing/run-")) == []
    assert list(store.list_starting("d/run-1-000000.json/x")) == []  # a file is no folder
    assert list(store.list("d/run-1-")) == []  # `list` keeps to folders, as before
    assert list(store.list("d")) == sorted(
        [*ours, "d/run-10-000000.json", "d/run-2-000000.json", "d/sub/r.json"]
    )
    with pytest.raises(ValueError, match="invalid evidence key"):
        list(store.list_starting("../escape/run-"))


@pytest.mark.parametrize(
    "key", ["../escape", "a/../../escape", "a/..", "..", "/abs", "a//b", "a/./b", "", "a/"]
)
def test_invalid_keys_are_rejected(store: FileStore, key: str) -> None:
    with pytest.raises(ValueError, match="invalid evidence key"):
        store.put_once(key, b"x")
    with pytest.raises(ValueError, match="invalid evidence key"):
        store.put(key, b"x")
    assert not (store.root.parent / "escape").exists()


def test_open_store_file_uri(tmp_path: Path) -> None:
    opened = open_store(f"file://{tmp_path / 'store'}")
    assert isinstance(opened, FileStore)
    opened.put_once("k", b"v")
    assert (tmp_path / "store" / "k").read_bytes() == b"v"


def test_open_store_rejects_unknown_scheme() -> None:
    with pytest.raises(ValueError, match="unsupported scheme 'ftp' for an evidence store"):
        open_store("ftp://example/store")
    with pytest.raises(ValueError, match="an evidence store is named by a URI"):
        open_store("s3:/one-slash")


# --- registry -------------------------------------------------------------------------------

V1 = """\
suite: refunds
defaults:
  - contains: refund
cases:
  - id: a
    input: "Can I get a refund?"
  - id: b
    input: "How long is the window?"
    scorers:
      - regex: '\\b30 days\\b'
"""

V2 = V1.replace("How long is the window?", "How many days do I have?")


def suite_from(text: str) -> Suite:
    return parse_suite(text, "refunds.yaml")


def test_first_publish_creates_version_one(store: FileStore) -> None:
    suite = suite_from(V1)
    record, created = registry.publish(store, suite)
    assert created is True
    assert record.version == 1
    assert record.ref == "refunds@1"
    assert record.content_hash == suite.content_hash
    assert record.cases == 2
    assert record.case_hashes == {c.id: c.content_hash for c in suite.cases}
    assert list(store.list("suites/refunds/versions/")) == ["suites/refunds/versions/000001.json"]


def test_identical_publish_is_a_no_op(store: FileStore) -> None:
    first, _ = registry.publish(store, suite_from(V1))
    again, created = registry.publish(store, suite_from(V1))
    assert created is False
    assert again.version == 1
    assert again == first
    assert list(store.list("suites/refunds/versions/")) == ["suites/refunds/versions/000001.json"]
    assert len(list(store.list("suites/refunds/content/"))) == 1


def test_semantically_identical_rewrite_is_a_no_op(store: FileStore) -> None:
    registry.publish(store, suite_from(V1))
    full_form = V1.replace(
        "- contains: refund", "- contains: {value: refund, case_sensitive: true}"
    )
    assert full_form != V1
    record, created = registry.publish(store, suite_from(full_form))
    assert (record.version, created) == (1, False)


def test_changed_suite_becomes_version_two(store: FileStore) -> None:
    registry.publish(store, suite_from(V1))
    record, created = registry.publish(store, suite_from(V2))
    assert created is True
    assert record.version == 2
    assert [v.version for v in registry.versions(store, "refunds")] == [1, 2]


def test_case_hashes_show_which_case_changed(store: FileStore) -> None:
    one, _ = registry.publish(store, suite_from(V1))
    two, _ = registry.publish(store, suite_from(V2))
    assert one.case_hashes["a"] == two.case_hashes["a"]
    assert one.case_hashes["b"] != two.case_hashes["b"]


def test_resolve_old_version_rebuilds_its_exact_document(store: FileStore) -> None:
    original = suite_from(V1)
    registry.publish(store, original)
    registry.publish(store, suite_from(V2))
    reset_process_state()  # nothing cached: read back from the store
    record, rebuilt = registry.resolve(store, "refunds@1")
    assert record.version == 1
    assert rebuilt.document() == original.document()
    assert rebuilt.content_hash == original.content_hash
    assert rebuilt.cases[1].input == "How long is the window?"


def test_a_stored_suite_that_no_longer_matches_its_address_is_refused(store: FileStore) -> None:
    record, _ = registry.publish(store, suite_from(V1))
    content = store.root / "suites" / "refunds" / "content"
    (stored,) = content.iterdir()
    stored.write_bytes(stored.read_bytes().replace(b"Can I get a refund?", b"Can I get a rebate"))
    reset_process_state()
    with pytest.raises(InputError, match=f"does not match its address {record.content_hash}"):
        registry.resolve(store, "refunds@1")


def test_resolve_by_name_is_the_latest_version(store: FileStore) -> None:
    registry.publish(store, suite_from(V1))
    registry.publish(store, suite_from(V2))
    reset_process_state()
    record, suite = registry.resolve(store, "refunds")
    assert record.version == 2
    assert suite.document() == suite_from(V2).document()


def test_resolve_from_a_second_store_handle_on_the_same_directory(tmp_path: Path) -> None:
    registry.publish(FileStore(tmp_path / "store"), suite_from(V1))
    record, suite = registry.resolve(open_store(f"file://{tmp_path / 'store'}"), "refunds@1")
    assert record.ref == "refunds@1"
    assert suite.content_hash == suite_from(V1).content_hash


def test_republishing_an_older_content_after_a_change_is_a_new_version(store: FileStore) -> None:
    registry.publish(store, suite_from(V1))
    registry.publish(store, suite_from(V2))
    record, created = registry.publish(store, suite_from(V1))
    assert (record.version, created) == (3, True)


@pytest.fixture
def no_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, parsing a suite file fails the test."""

    def refuse(text: str, source: str) -> Suite:
        raise AssertionError(f"parsed {source} again")

    monkeypatch.setattr(registry, "parse_suite", refuse)


def test_a_published_suite_file_is_recognised_by_its_bytes_without_parsing(
    store: FileStore, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    file = tmp_path / "refunds.yaml"
    file.write_text(V1)
    first, loaded = registry.publish_or_resolve(store, str(file))
    digest = hashlib.sha256(V1.encode()).hexdigest()
    assert store.exists(f"suite-files/{digest}.json")
    reset_process_state()  # a new process: nothing cached
    request.getfixturevalue("no_parsing")
    again, suite = registry.publish_or_resolve(store, str(file))
    assert again == first
    assert suite.document() == loaded.document()
    assert registry.suite_names(store) == ["refunds"]


def test_a_changed_suite_file_publishes_a_new_version_and_its_bytes_then_resolve(
    store: FileStore, tmp_path: Path
) -> None:
    file = tmp_path / "refunds.yaml"
    for text, expected in ((V1, 1), (V2, 2), (V2, 2), (V1, 3), (V1, 3)):
        file.write_text(text)
        record, suite = registry.publish_or_resolve(store, str(file))
        assert record.version == expected
        assert suite.content_hash == suite_from(text).content_hash == record.content_hash


def test_a_file_record_that_disagrees_with_the_latest_version_is_not_trusted(
    store: FileStore, tmp_path: Path
) -> None:
    file = tmp_path / "refunds.yaml"
    file.write_text(V1)
    registry.publish_or_resolve(store, str(file))
    (record,) = (store.root / "suite-files").iterdir()
    record.write_text(record.read_text().replace("sha256:", "sha256:0"))
    version, suite = registry.publish_or_resolve(store, str(file))
    assert version.version == 1
    assert suite.content_hash == suite_from(V1).content_hash


def test_resolve_unknown_name_raises_not_found(store: FileStore) -> None:
    with pytest.raises(NotFoundError, match="never published"):
        registry.resolve(store, "ghost")


def test_resolve_unknown_version_raises_not_found(store: FileStore) -> None:
    registry.publish(store, suite_from(V1))
    with pytest.raises(NotFoundError, match="refunds@7"):
        registry.resolve(store, "refunds@7")


@pytest.mark.parametrize(
    "ref", ["Refunds", "refunds@", "refunds@v2", "@1", "re funds", "a@1@2", ""]
)
def test_bad_ref_raises_input_error(store: FileStore, ref: str) -> None:
    with pytest.raises(InputError, match="NAME@VERSION"):
        registry.resolve(store, ref)


@pytest.mark.parametrize(
    ("ref", "parsed"), [("refunds", ("refunds", None)), ("refunds@12", ("refunds", 12))]
)
def test_parse_ref(ref: str, parsed: tuple[str, int | None]) -> None:
    assert registry.parse_ref(ref) == parsed


def test_latest_version_of_unpublished_suite_is_none(store: FileStore) -> None:
    assert registry.latest_version(store, "refunds") is None


def test_suite_names_lists_published_suites(store: FileStore) -> None:
    assert registry.suite_names(store) == []
    registry.publish(store, suite_from(V1))
    registry.publish(store, suite_from(V1.replace("suite: refunds", "suite: billing")))
    registry.publish(store, suite_from(V2))
    assert registry.suite_names(store) == ["billing", "refunds"]


# --- hashing --------------------------------------------------------------------------------


@pytest.fixture
def no_env_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_ENV, raising=False)


def test_store_secret_is_created_once_and_reused(store: FileStore, no_env_secret: None) -> None:
    first = store_secret(store)
    assert len(first) == 64
    assert store.get(SECRET_KEY) == first
    assert store_secret(store) == first
    assert store_secret(FileStore(store.root)) == first
    assert list(store.list("_meta/")) == [SECRET_KEY]


def test_each_store_gets_its_own_secret(tmp_path: Path, no_env_secret: None) -> None:
    assert store_secret(FileStore(tmp_path / "one")) != store_secret(FileStore(tmp_path / "two"))


def test_env_secret_takes_precedence(store: FileStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, "configured-secret")
    assert store_secret(store) == b"configured-secret"
    assert store.exists(SECRET_KEY) is False


def test_output_hasher_same_secret_same_hash() -> None:
    assert OutputHasher(b"k1")("answer") == OutputHasher(b"k1")("answer")


def test_output_hasher_is_keyed() -> None:
    assert OutputHasher(b"k1")("answer") != OutputHasher(b"k2")("answer")


def test_output_hasher_distinguishes_outputs() -> None:
    hasher = OutputHasher(b"k1")
    assert hasher("answer") != hasher("answer ")


def test_output_hasher_is_reusable_across_calls() -> None:
    hasher = OutputHasher(b"k1")
    first = hasher("a")
    hasher("b")
    assert hasher("a") == first


@pytest.mark.parametrize("secret", [b"", b"k1", b"x" * 64])
@pytest.mark.parametrize("text", ["", "yes", "No. Returns are accepted within 30 days."])
def test_output_hash_is_never_the_plain_sha256(secret: bytes, text: str) -> None:
    digest = OutputHasher(secret)(text)
    plain = hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert digest.startswith("hmac-sha256:")
    assert digest.removeprefix("hmac-sha256:") != plain
    assert plain not in digest
    assert len(digest.removeprefix("hmac-sha256:")) == 64
