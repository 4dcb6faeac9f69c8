"""The user's local copy of a large published suite (`assay.suites.local_cache`): a re-run loads
it without validating, and a copy that may not be trusted is never used (nor unpickled)."""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path

import pytest

from assay.errors import InputError, NotFoundError
from assay.process_state import reset_process_state
from assay.store import FileStore
from assay.suites import local_cache, registry
from assay.suites.suite import load_published

CASES = local_cache.MIN_CASES


def _suite_file(folder: Path, cases: int = CASES, name: str = "big") -> Path:
    path = folder / f"{name}.json"
    documents = [
        {
            "id": f"case-{i:05d}",
            "input": f"question {i}",
            "tags": ["billing"] if i % 3 else [],
            "scorers": [{"contains": "refund"}, {"numeric_range": {"min": i, "max": i + 5}}],
        }
        for i in range(cases)
    ]
    path.write_text(json.dumps({"suite": name, "cases": documents}), encoding="utf-8")
    return path


def _copies() -> list[Path]:
    folder = local_cache.cache_dir()
    assert folder is not None
    return sorted(folder.glob("*.pickle"))


def _published(tmp_path: Path) -> tuple[FileStore, Path, registry.SuiteVersion]:
    """A large suite published, then re-run once in a new process state: its copy is kept."""
    store = FileStore(tmp_path / "store")
    suite_file = _suite_file(tmp_path)
    registry.publish_or_resolve(store, str(suite_file))
    reset_process_state()
    version, _ = registry.publish_or_resolve(store, str(suite_file))
    reset_process_state()
    return store, suite_file, version


def _without_stored_text(store: FileStore, version: registry.SuiteVersion) -> None:
    """Remove the suite's canonical text: a load that still succeeds used the local copy."""
    digest = version.content_hash.removeprefix("sha256:")
    (store.root / "suites" / version.suite / "content" / f"{digest}.json").unlink()


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(local_cache.CACHE_DIR_ENV, str(tmp_path / "cache"))


def test_a_rerun_loads_the_local_copy_identical_to_the_validated_suite(tmp_path: Path) -> None:
    store, suite_file, version = _published(tmp_path)
    (copy,) = _copies()
    assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    assert stat.S_IMODE(copy.parent.stat().st_mode) == 0o700
    key = f"suites/big/content/{version.content_hash.removeprefix('sha256:')}.json"
    validated = load_published(store.get(key), version.content_hash, key)
    _without_stored_text(store, version)

    again, suite = registry.publish_or_resolve(store, str(suite_file))

    assert again == version
    assert suite == validated
    assert suite.canonical == validated.canonical
    assert [c.model_fields_set for c in suite.cases] == [
        c.model_fields_set for c in validated.cases
    ]
    specs = [
        (ours, theirs)
        for case, other in zip(suite.cases, validated.cases, strict=True)
        for ours, theirs in zip(case.scorers, other.scorers, strict=True)
    ]
    assert [(s.model_fields_set, s.config.model_fields_set) for s, _ in specs] == [
        (v.model_fields_set, v.config.model_fields_set) for _, v in specs
    ]
    # identical entries are one shared spec, as validation makes them (`CaseScorers` relies on it)
    assert len({id(s) for s, _ in specs}) == len({id(v) for _, v in specs}) < len(specs)


def test_a_changed_file_is_validated_again_and_a_bad_one_names_its_line(tmp_path: Path) -> None:
    store, suite_file, version = _published(tmp_path)
    documents = json.loads(suite_file.read_text())
    documents["cases"][7]["input"] = "changed"
    suite_file.write_text(json.dumps(documents))
    changed, suite = registry.publish_or_resolve(store, str(suite_file))
    assert (changed.version, suite.cases[7].input) == (version.version + 1, "changed")

    documents["cases"][7]["scorers"] = [{"no_such_check": 1}]
    suite_file.write_text(json.dumps(documents, indent=1))
    with pytest.raises(InputError) as raised:
        registry.publish_or_resolve(store, str(suite_file))
    assert "no_such_check" in str(raised.value) and "line" in str(raised.value)


def test_a_tampered_copy_is_not_trusted(tmp_path: Path) -> None:
    store, suite_file, version = _published(tmp_path)
    (copy,) = _copies()
    data = bytearray(copy.read_bytes())
    data[-100] ^= 1
    copy.write_bytes(bytes(data))
    _without_stored_text(store, version)
    with pytest.raises(NotFoundError):  # the store was read: the copy was not used
        registry.publish_or_resolve(store, str(suite_file))


def test_a_copy_other_users_may_read_is_not_trusted(tmp_path: Path) -> None:
    store, suite_file, version = _published(tmp_path)
    (copy,) = _copies()
    copy.chmod(0o644)
    _without_stored_text(store, version)
    with pytest.raises(NotFoundError):
        registry.publish_or_resolve(store, str(suite_file))


class _Planted:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.mkdir, (str(self.marker),)


def test_a_copy_that_would_build_anything_but_suite_models_is_never_unpickled(
    tmp_path: Path,
) -> None:
    """Even with a header that matches (as only this user could write it), the unpickler
    refuses a global outside Assay's models, before anything is called."""
    store, suite_file, version = _published(tmp_path)
    (copy,) = _copies()
    marker = tmp_path / "planted"
    payload = pickle.dumps(_Planted(marker))
    copy.write_bytes(local_cache._header(local_cache.code_fingerprint(), payload) + payload)

    _, suite = registry.publish_or_resolve(store, str(suite_file))

    assert not marker.exists()
    assert len(suite.cases) == CASES  # validated from the store, and kept again
    reset_process_state()
    _without_stored_text(store, version)
    assert len(registry.publish_or_resolve(store, str(suite_file))[1].cases) == CASES


def test_a_small_suite_keeps_no_copy(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "store")
    suite_file = _suite_file(tmp_path, cases=CASES - 1, name="small")
    registry.publish_or_resolve(store, str(suite_file))
    reset_process_state()
    registry.publish_or_resolve(store, str(suite_file))
    assert _copies() == []
