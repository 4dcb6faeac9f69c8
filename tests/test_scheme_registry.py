"""A storage backend is one `Scheme` and one entry in `SCHEMES` (docs/architecture.md, "How to
add a storage scheme"): a toy `mem://` scheme written here in a few lines keeps a suite run's
evidence and serves its outputs, end to end through the launcher and a real Prefect API, and
whether a service may read it for a caller is the scheme's own `remote`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from assay import schemes
from assay.api.requests import RunRequest
from assay.cli import remote
from assay.errors import EvidenceConflictError, InputError, NotFoundError
from assay.outputs.reference import OutputsReference
from assay.runs.chunks import read_cases
from assay.s3 import ObjectPin
from assay.schemes.base import Location, Scheme
from assay.store.base import EvidenceStore
from tests.launched import suite_run

OBJECTS: dict[str, bytes] = {}
"""Every `mem://` object of this process, by URI."""


class MemoryStore(EvidenceStore):
    """An evidence store in `OBJECTS`, under its URI."""

    write_guard = "in-memory"

    def __init__(self, uri: str) -> None:
        self.uri = uri.rstrip("/")

    def put_once(self, key: str, data: bytes) -> bool:
        if self.exists(key):
            if self.get(key) != data:
                raise EvidenceConflictError(f"evidence object {key} exists with different content")
            return False
        self.put(key, data)
        return True

    def put(self, key: str, data: bytes) -> None:
        OBJECTS[f"{self.uri}/{key}"] = data

    def get(self, key: str) -> bytes:
        try:
            return OBJECTS[f"{self.uri}/{key}"]
        except KeyError:
            raise NotFoundError(f"no object {key}") from None

    def exists(self, key: str) -> bool:
        return f"{self.uri}/{key}" in OBJECTS

    def list(self, prefix: str) -> Iterator[str]:
        start = f"{self.uri}/"
        return iter(sorted(k.removeprefix(start) for k in OBJECTS if k.startswith(start + prefix)))


class MemScheme(Scheme):
    """The whole backend: where it may be used, its store, its objects and how to read them."""

    name = "mem"
    form = "mem://NAME"
    holds_stores = True
    shared = True

    def open_store(self, location: Location, connection: Mapping[str, Any]) -> EvidenceStore:
        return MemoryStore(location.uri)

    def objects(self, location: Location, suffixes: tuple[str, ...], what: str) -> list[str]:
        return sorted(k for k in OBJECTS if k.startswith(location.uri) and k.endswith(suffixes))

    def one_object(self, location: Location, what: str) -> str:
        return location.uri

    def read(
        self, location: Location, start: int, end: int, pin: ObjectPin | None
    ) -> tuple[bytes, ObjectPin | None]:
        return OBJECTS[location.uri][start:end], pin


@pytest.fixture
def mem(monkeypatch: pytest.MonkeyPatch) -> MemScheme:
    """The toy scheme registered for one test: its one registration."""
    scheme = MemScheme()
    monkeypatch.setitem(schemes.SCHEMES, scheme.name, scheme)
    return scheme


@pytest.mark.usefixtures("prefect_api", "mem")
def test_a_suite_runs_with_its_evidence_and_outputs_on_a_registered_scheme(
    tmp_path: Path,
) -> None:
    root = f"mem://{tmp_path.name}"
    cases = {"polite": "thanks", "greets": "hello", "short": "a much too long answer"}
    suite = tmp_path / "toy.json"
    suite.write_text(
        json.dumps(
            {
                "suite": "toy",
                "pass_threshold": 0.5,
                "cases": [
                    {"id": "polite", "input": "q", "scorers": [{"contains": "thanks"}]},
                    {"id": "greets", "input": "q", "scorers": [{"contains": "hello"}]},
                    {"id": "short", "input": "q", "scorers": [{"contains": "short"}]},
                ],
            }
        )
    )
    OBJECTS[f"{root}/outputs/part-1.jsonl"] = b"".join(
        json.dumps({"case_id": case, "output": text}).encode() + b"\n"
        for case, text in cases.items()
    )

    result = suite_run(
        suite=str(suite),
        outputs=f"{root}/outputs/",
        subject="agent:bot@v1",
        store=f"{root}/evidence",
    )

    assert (result.metrics.cases, result.metrics.passed) == (3, 2)
    assert result.passed is True
    store = schemes.open_store(f"{root}/evidence")
    statuses = {case.case_id: case.status for case in read_cases(store, result.run_id)}
    assert statuses == {"polite": "pass", "greets": "pass", "short": "fail"}
    assert any(key.startswith(f"{root}/evidence/suites/") for key in OBJECTS)


def test_a_service_reads_a_caller_named_location_only_on_a_remote_scheme(
    mem: MemScheme, monkeypatch: pytest.MonkeyPatch
) -> None:
    request = RunRequest(
        suite="toy", subject="agent:bot@v1", outputs_uri="mem://lab/outputs/"
    )  # a valid request: whether its caller may name the location is the service's to say
    with pytest.raises(InputError, match="unsupported scheme 'mem' for outputs_uri"):
        request.refuse_local_outputs()

    monkeypatch.setattr(MemScheme, "remote", True)

    request.refuse_local_outputs()
    # The command line, a client of the service, sends such a location as it is.
    located = OutputsReference(location="mem://lab/outputs/")
    assert remote._outputs(located, local=False) == (None, "mem://lab/outputs/")


def test_the_recipe_names_the_files_a_backend_touches_and_s3_follows_it() -> None:
    root = Path(__file__).resolve().parent.parent
    page = (root / "docs" / "architecture.md").read_text(encoding="utf-8")
    recipe = page.split("## How to add a storage scheme", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`((?:assay|blocks|tasks|tests)/[\w/]+\.py)`", recipe))
    assert {"assay/schemes/base.py", "assay/schemes/__init__.py", "assay/schemes/s3.py"} <= named
    assert [p for p in sorted(named) if "NAME" not in p and not (root / p).is_file()] == []
    s3 = schemes.SCHEMES["s3"]
    assert type(s3).__module__ == "assay.schemes.s3"
    assert (s3.holds_stores, s3.shared, s3.remote) == (True, True, True)
