"""OTLP usage and times outside physical bounds are rejected in `partialSuccess`, named by rule;
negative and NaN figures are counted, not dropped; documents nested too deep are one line."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.monitor.receiver import JSON, receive, response_body
from assay.monitor.spans import MAX_COST_USD, MAX_SESSION_DAYS, MAX_TOKENS, PendingUsage
from assay.otel.traces import json_spans
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite
from tests.conftest import EXAMPLES

START = 1_780_000_000 * 10**9
DAY_NS = 86_400 * 10**9


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return {"stringValue": str(value)}
    return {"intValue": str(value)} if isinstance(value, int) else {"doubleValue": value}


def _root(n: int, attributes: dict[str, Any], end_ns: int = START + 10**9) -> dict[str, Any]:
    return {
        "traceId": f"{n:032x}",
        "spanId": f"{n:016x}",
        "startTimeUnixNano": str(START),
        "endTimeUnixNano": str(end_ns),
        "attributes": [{"key": k, "value": _value(v)} for k, v in attributes.items()],
    }


def _export(spans: list[dict[str, Any]]) -> bytes:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "bot"}}]}
    document = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(document).encode()  # NaN is written as a bare NaN, which OTLP/JSON reads


BAD = [
    {"gen_ai.usage.cost": 1e308},
    {"gen_ai.usage.input_tokens": 2**63},
    {"gen_ai.usage.output_tokens": -5},
    {"gen_ai.usage.cost": -0.5},
    {"gen_ai.usage.cost": math.nan},
]


def test_usage_and_durations_outside_physical_bounds_are_rejected_by_rule(tmp_path: Path) -> None:
    spans = [_root(n + 1, attributes) for n, attributes in enumerate(BAD)]
    spans.append(_root(90, {}, end_ns=START + 292 * 365 * DAY_NS))
    spans.append(_root(91, {"gen_ai.usage.input_tokens": 1200, "gen_ai.usage.cost": 0.01}))
    receipt = receive(
        FileStore(tmp_path / "e"), _export(spans), JSON, None, PendingUsage(), limit=1 << 20
    )
    assert [s.session_id for s in receipt.batch.signals] == [f"{91:032x}"]
    assert receipt.batch.rejected_spans == 6
    answer = json.loads(response_body(receipt, JSON))["partialSuccess"]
    assert answer["rejectedSpans"] == "6"
    message = answer["errorMessage"]
    assert f"gen_ai.usage.cost must be a number from 0 to {MAX_COST_USD:,.0f}" in message
    assert f"gen_ai.usage.input_tokens must be a whole number from 0 to {MAX_TOKENS:,}" in message
    assert "gen_ai.usage.output_tokens must be a whole number" in message
    assert f"a root span lasts at most {MAX_SESSION_DAYS} days" in message
    assert "1e+308" not in message and "9223372036854775808" not in message


def test_a_child_span_outside_the_bounds_is_counted_and_not_summed(tmp_path: Path) -> None:
    child = {**_root(7, {"gen_ai.usage.cost": -3.0}), "spanId": f"{8:016x}"}
    child["parentSpanId"] = f"{7:016x}"
    root = _root(7, {})
    receipt = receive(
        FileStore(tmp_path / "e"), _export([child, root]), JSON, None, PendingUsage(), limit=1 << 20
    )
    assert receipt.batch.rejected_spans == 1
    (signal,) = receipt.batch.signals
    assert signal.cost_usd is None


DEEP = '{"resourceSpans": ' + "[" * 50_000 + "]" * 50_000 + "}"


def test_a_document_nested_too_deep_is_an_input_error() -> None:
    with pytest.raises(InputError, match="nests deeper than"):
        json_spans(DEEP.encode(), "deep.json", 1)


def test_the_cli_says_one_line_for_a_deep_trace_file(tmp_path: Path, store_dir: Path) -> None:
    registry.publish(FileStore(store_dir), load_suite(EXAMPLES / "support-suite.yaml"))
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    invoked = CliRunner().invoke(
        app, ["run", "support-bot", "--outputs", str(path), "--outputs-format", "otlp"]
    )
    assert invoked.exit_code == 2, invoked.output[-1000:]
    lines = invoked.output.strip().splitlines()
    assert len(lines) == 1 and "nests deeper than" in lines[0] and str(path) in lines[0]
