"""The framework recordings exist and decode: every setup of `tests/frameworks/record.py` ran
every scenario through a real framework against the scripted model server, its OTLP bodies
parse, every case has its `assay.case_id`, and content reached the recording when it is on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.frameworks.record import ALL_SETUPS, SETUPS
from tests.frameworks.scenarios import CANARY, CASE_IDS


def _trace_request(folder: Path) -> object:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    return ExportTraceServiceRequest.FromString((folder / "traces.pb").read_bytes())


def _attribute(attributes: object, key: str) -> str | None:
    for attribute in attributes:  # type: ignore[attr-defined]
        if attribute.key == key:
            return str(attribute.value.string_value)
    return None


@pytest.mark.parametrize("setup", ALL_SETUPS)
def test_the_traces_decode_and_carry_every_case_id(
    framework_recordings: dict[str, Path], setup: str
) -> None:
    from google.protobuf.json_format import Parse
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    folder = framework_recordings[setup]
    merged = _trace_request(folder)
    spans = [
        span
        for resource in merged.resource_spans  # type: ignore[attr-defined]
        for scope in resource.scope_spans
        for span in scope.spans
    ]
    case_ids = {_attribute(span.attributes, "assay.case_id") for span in spans} - {None}
    assert case_ids == set(CASE_IDS)
    assert len({span.trace_id for span in spans}) == len(CASE_IDS)

    lines = (folder / "traces.json").read_text(encoding="utf-8").splitlines()
    assert lines
    per_line = [Parse(line, ExportTraceServiceRequest()) for line in lines]
    assert sum(
        len(scope.spans)
        for request in per_line
        for r in request.resource_spans
        for scope in r.scope_spans
    ) == len(spans)


@pytest.mark.parametrize("setup", ALL_SETUPS)
def test_the_ground_truth_has_every_case(framework_recordings: dict[str, Path], setup: str) -> None:
    folder = framework_recordings[setup]
    records = [json.loads(line) for line in (folder / "messages.jsonl").read_text().splitlines()]
    assert [record["case_id"] for record in records] == list(CASE_IDS)
    assert all(record["messages"] for record in records)
    notes = json.loads((folder / "notes.json").read_text())
    assert notes["setup"] == setup


@pytest.mark.parametrize("setup", [s for s in ALL_SETUPS if SETUPS[s].content_in])
def test_content_reaches_the_recording_when_it_is_on(
    framework_recordings: dict[str, Path], setup: str
) -> None:
    folder = framework_recordings[setup]
    recording = folder / f"{SETUPS[setup].content_in}.pb"
    assert CANARY.encode() in recording.read_bytes()
    assert CANARY in (folder / "messages.jsonl").read_text()
