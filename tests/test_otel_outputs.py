"""OTLP trace exports as candidate outputs (issue #18 part 1): read like the same JSONL, and the
same input-error rules, naming file, line and the span's position."""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.intake.record import Evidence
from assay.outputs.candidate import CandidateOutput
from assay.outputs.index import index_outputs
from assay.outputs.slices import OutputsIndex, read_slice
from assay.runs.chunks import read_cases
from assay.runs.records import EvalResult
from assay.schemes.s3 import parse_s3_uri
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite
from tests.conftest import EXAMPLES
from tests.otel_agent import agent_traces, otlp_json

V2 = EXAMPLES / "outputs" / "support-bot-v2.jsonl"


def jsonl_records(path: Path = V2) -> list[dict[str, Any]]:
    """The example outputs without `guardrail_triggers`, which traces do not carry."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [{k: v for k, v in row.items() if k != "guardrail_triggers"} for row in rows]


def suite_ids() -> list[str]:
    return [case.id for case in load_suite(EXAMPLES / "support-suite.yaml").cases]


def read_all(index: OutputsIndex, selected: Collection[str]) -> list[CandidateOutput]:
    return [record for piece in index.slices for record in read_slice(piece, selected)]


def outputs_of(uri: str, chunk_size: int = 1000) -> tuple[list[CandidateOutput], list[str]]:
    ids = suite_ids()
    index = index_outputs(uri, set(ids), ids, chunk_size)
    return read_all(index, set(ids)), index.missing


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def hex_ids(node: Any) -> Any:
    """The document with base64 ids rewritten in hex, as the OTLP/JSON spec and the Collector
    write them."""
    if isinstance(node, list):
        return [hex_ids(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {
        k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else hex_ids(v)
        for k, v in node.items()
    }


def batches(document: dict[str, Any], size: int) -> Iterator[dict[str, Any]]:
    """The document's spans re-cut into documents of `size` spans, like a batching exporter."""
    (resource_spans,) = document["resourceSpans"]
    (scope,) = resource_spans["scopeSpans"]
    spans = scope["spans"]
    for i in range(0, len(spans), size):
        yield {
            "resourceSpans": [
                {**resource_spans, "scopeSpans": [{**scope, "spans": spans[i : i + size]}]}
            ]
        }


def trace_file(path: Path, rows: list[dict[str, Any]], **resource: str) -> Path:
    path.write_text(otlp_json(agent_traces(rows, resource or None)))
    return path


def error_of(uri: str | Path, known: Collection[str] | None = None) -> InputError:
    ids = list(known or suite_ids())
    with pytest.raises(InputError) as info:
        index_outputs(str(uri), set(ids), ids, 10)
    return info.value


# --- the same outputs as JSONL ----------------------------------------------------------------


def test_sdk_json_export_reads_as_the_same_outputs_as_jsonl(tmp_path: Path) -> None:
    rows = jsonl_records()
    from_jsonl, missing_jsonl = outputs_of(str(write_jsonl(tmp_path / "out.jsonl", rows)))
    from_traces, missing_traces = outputs_of(str(trace_file(tmp_path / "traces.json", rows)))

    assert [o.model_dump() for o in from_traces] == [o.model_dump() for o in from_jsonl]
    assert missing_traces == missing_jsonl
    assert sorted(missing_traces) == ["cloudstep-sizes-json", "loyalty-balance-json"]
    first = from_traces[0]
    assert first.duration_ms == 534 and first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (394, 30)  # summed: 2 spans


def test_collector_jsonl_with_hex_ids_split_over_batches_and_files(tmp_path: Path) -> None:
    """Child spans end, and are exported, before their roots; batches and files cut traces."""
    rows = jsonl_records()
    document = hex_ids(json.loads(otlp_json(agent_traces(rows))))
    lines = [json.dumps(batch) for batch in batches(document, 7)]
    folder = tmp_path / "export"
    folder.mkdir()
    half = len(lines) // 2
    (folder / "traces-1.jsonl").write_text("\n".join(lines[:half]) + "\n")
    (folder / "traces-2.jsonl").write_text("\n\n".join(lines[half:]))

    from_traces, _ = outputs_of(str(folder), chunk_size=4)
    from_jsonl, _ = outputs_of(str(write_jsonl(tmp_path / "out.jsonl", rows)))
    assert sorted(o.model_dump_json() for o in from_traces) == sorted(
        o.model_dump_json() for o in from_jsonl
    )
    index = index_outputs(str(folder), set(suite_ids()), suite_ids(), 4)
    assert any(piece.extra for piece in index.slices)  # some traces span other documents


@pytest.mark.usefixtures("prefect_api")
def test_suite_scored_from_traces_equals_the_jsonl_run_case_for_case(
    store_dir: Path, tmp_path: Path
) -> None:
    from tests.launched import suite_run

    store = FileStore(store_dir)
    version, _ = registry.publish(store, load_suite(EXAMPLES / "support-suite.yaml"))
    rows = jsonl_records()
    jsonl = write_jsonl(tmp_path / "out.jsonl", rows)
    traces = trace_file(tmp_path / "traces.json", rows)

    by_jsonl = suite_run(suite=version.ref, outputs=str(jsonl), subject="agent:bot@jsonl")
    flags = ["--outputs-format", "otlp", "--case-attribute", "assay.case_id", "--json"]
    invoked = CliRunner().invoke(
        app, ["run", version.ref, "--outputs", str(traces), *flags, "--subject", "agent:bot@o"]
    )
    assert invoked.exit_code == 0, invoked.output
    by_traces = EvalResult.model_validate_json(invoked.output)

    assert by_traces.metrics.model_dump() == by_jsonl.metrics.model_dump()
    assert by_traces.metrics.scored == 50 and by_traces.metrics.missing == 2

    def cases(run_id: str) -> list[dict[str, Any]]:
        return sorted(
            (c.model_dump() for c in read_cases(store, run_id)), key=lambda c: c["case_id"]
        )

    assert cases(by_traces.run_id) == cases(by_jsonl.run_id)


def test_s3_prefix_of_trace_exports(s3_env: str, tmp_path: Path) -> None:
    from assay.s3 import make_client

    bucket, _ = parse_s3_uri(s3_env)
    rows = jsonl_records()
    body = otlp_json(agent_traces(rows), indent=None).encode()
    make_client().put_object(Bucket=bucket, Key="sandbox/run-1/traces.json", Body=body)

    from_s3, _ = outputs_of(f"s3://{bucket}/sandbox/run-1/")
    from_jsonl, _ = outputs_of(str(write_jsonl(tmp_path / "out.jsonl", rows)))
    assert [o.model_dump() for o in from_s3] == [o.model_dump() for o in from_jsonl]


# --- detection, attributes, fallbacks --------------------------------------------------------


def test_folder_mixes_jsonl_outputs_and_trace_exports_and_skips_other_json(
    tmp_path: Path,
) -> None:
    rows = jsonl_records()
    write_jsonl(tmp_path / "a.jsonl", rows[:10])
    trace_file(tmp_path / "b.json", rows[10:])
    (tmp_path / "manifest.json").write_text('{"run": "sandbox-7"}')
    from_folder, _ = outputs_of(str(tmp_path))
    assert [o.case_id for o in from_folder] == [r["case_id"] for r in rows]


def test_case_attribute_on_the_resource_and_a_custom_name(tmp_path: Path) -> None:
    rows = [{"case_id": "x", "output": "Returns close after 30 days.", "duration_ms": 5}]
    spans = agent_traces(rows, {"service.name": "bot", "eval.case": "window-40-days"})
    document = json.loads(otlp_json(spans))
    for span in document["resourceSpans"][0]["scopeSpans"][0]["spans"]:
        span["attributes"] = [a for a in span.get("attributes", []) if a["key"] != "assay.case_id"]
    path = tmp_path / "traces.json"
    path.write_text(json.dumps(document))

    got, _ = outputs_of(f"{path}?case_attribute=eval.case")
    assert [(o.case_id, o.output) for o in got] == [
        ("window-40-days", "Returns close after 30 days.")
    ]
    error = error_of(path)  # the default attribute is on no span
    assert "no span carries attribute 'assay.case_id'" in error.problem
    assert error.source == str(path) and error.line == 1 and error.field is not None
    assert error.field.startswith("resourceSpans[0].scopeSpans[0].spans[")


def span_document(attributes: dict[str, Any], **span: Any) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}

    return {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": span.get("trace", "5b8efff798038103d269b633813fc60c"),
                                "spanId": span.get("span", "eee19b7ec3c1b174"),
                                "name": "agent",
                                "startTimeUnixNano": "1000000000",
                                "endTimeUnixNano": "1250000000",
                                "attributes": [
                                    {"key": k, "value": value(v)} for k, v in attributes.items()
                                ],
                            }
                        ]
                    }
                ],
            }
        ]
    }


@pytest.mark.parametrize(
    ("attributes", "text"),
    [
        ({"output.value": "OpenInference answer"}, "OpenInference answer"),
        ({"gen_ai.completion": "legacy answer"}, "legacy answer"),
        (
            {"gen_ai.completion": json.dumps([{"role": "assistant", "content": "listed"}])},
            "listed",
        ),
        (
            {
                "gen_ai.output.messages": json.dumps(
                    [
                        {"role": "assistant", "parts": [{"type": "text", "content": "one"}]},
                        {"role": "tool", "parts": [{"type": "text", "content": "not this"}]},
                        {
                            "role": "assistant",
                            "parts": [
                                {"type": "tool_call", "name": "lookup"},
                                {"type": "text", "content": "two"},
                            ],
                        },
                    ]
                ),
                "output.value": "not preferred",
            },
            "one\ntwo",
        ),
    ],
)
def test_output_text_conventions(tmp_path: Path, attributes: dict[str, Any], text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(span_document({"assay.case_id": "window-40-days", **attributes})))
    (got,), _ = outputs_of(str(path))
    assert (got.output, got.duration_ms, got.usage) == (text, 250.0, None)


def test_a_traced_case_without_output_text_is_scored_with_its_text_unseen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(span_document({"assay.case_id": "window-40-days"})))
    (got,), missing = outputs_of(str(path))
    assert "window-40-days" not in missing and got.output == ""
    assert Evidence.TEXT in got.unseen and Evidence.TOOL_NAMES in got.unseen


def test_deprecated_token_attributes_are_read(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    attributes = {
        "assay.case_id": "window-40-days",
        "output.value": "ok",
        "gen_ai.usage.prompt_tokens": 12,
        "gen_ai.usage.completion_tokens": 3,
    }
    path.write_text(json.dumps(span_document(attributes)))
    (got,), _ = outputs_of(str(path))
    assert got.usage is not None
    assert (got.usage.input_tokens, got.usage.output_tokens) == (12, 3)


# --- input errors ----------------------------------------------------------------------------


def test_two_traces_for_one_case_name_both_places(tmp_path: Path) -> None:
    first = span_document({"assay.case_id": "window-40-days", "output.value": "a"})
    second = span_document(
        {"assay.case_id": "window-40-days", "output.value": "b"},
        trace="00000000000000000000000000000002",
    )
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(first) + "\n" + json.dumps(second) + "\n")
    error = error_of(path)
    assert error.line == 2 and error.field == "resourceSpans[0].scopeSpans[0].spans[0]"
    assert f"duplicate output for case 'window-40-days' (first at {path} line 1)" in str(error)


def test_unknown_case_and_malformed_document_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = json.dumps(span_document({"assay.case_id": "window-40-days", "output.value": "a"}))
    path.write_text(good + "\n" + '{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId"\n')
    error = error_of(path, known=["window-40-days"])
    assert (error.source, error.line) == (str(path), 2) and "malformed JSON" in error.problem

    path.write_text(json.dumps(span_document({"assay.case_id": "nope", "output.value": "a"})))
    error = error_of(path)
    assert error.line == 1 and "unknown case id 'nope'" in error.problem


def test_bad_span_id_and_wrong_field_type_are_input_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(span_document({"assay.case_id": "c"}, span="zz")))
    error = error_of(path, known=["c"])
    assert error.field == "resourceSpans[0].scopeSpans[0].spans[0]"
    assert "spanId: not a 8-byte id in hex or base64" in error.problem

    path.write_text('{"resourceSpans": [{"scopeSpans": [{"spans": "CANARY text"}]}]}')
    error = error_of(path, known=["c"])
    assert error.field == "resourceSpans[0].scopeSpans[0].spans" and "CANARY" not in str(error)


def test_forced_format_reads_a_trace_file_with_any_name(tmp_path: Path) -> None:
    rows = jsonl_records()[:3]
    path = tmp_path / "export.data"
    path.write_text("\n" + otlp_json(agent_traces(rows)))
    got, _ = outputs_of(f"{path}?format=otlp")
    assert [o.case_id for o in got] == [r["case_id"] for r in rows]
    error = error_of(f"{path}?format=jsonl")
    assert error.source == str(path)


def test_cli_rejects_an_unknown_outputs_format(tmp_path: Path) -> None:
    invoked = CliRunner().invoke(
        app, ["run", "support-bot", "--outputs", str(V2), "--outputs-format", "xml"]
    )
    assert invoked.exit_code == 2
    assert "--outputs-format must be one of auto, jsonl, otlp, openai-chat" in invoked.output


def test_a_trace_with_no_text_anywhere_says_so_with_the_count_and_an_example(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(span_document({"assay.case_id": "window-40-days"})))
    ids = suite_ids()
    index = index_outputs(str(path), set(ids), ids, 10)
    assert (index.without_text, index.without_text_example) == (1, "window-40-days")
    assert index.warning() == (
        "1 traced case(s) carry no output text on the case span or any LLM span below it"
        " (e.g. 'window-40-days'); their text checks are unavailable (is content capture"
        " off?)"
    )
    jsonl = write_jsonl(tmp_path / "o.jsonl", [{"case_id": "window-40-days", "output": "x"}])
    assert index_outputs(str(jsonl), set(ids), ids, 10).warning() is None


def test_bad_tool_span_arguments_name_file_line_and_attribute(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    document = span_document({"assay.case_id": "window-40-days", "output.value": "ok"})
    spans = document["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans.append(
        {
            **spans[0],
            "spanId": "aaaaaaaaaaaaaaaa",
            "parentSpanId": spans[0]["spanId"],
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                {"key": "gen_ai.tool.name", "value": {"stringValue": "lookup"}},
                {"key": "gen_ai.tool.call.arguments", "value": {"stringValue": '{"q": "CANARY'}},
            ],
        }
    )
    path.write_text(json.dumps(document))
    error = error_of(path)
    assert (error.source, error.line) == (str(path), 1)
    assert error.field == (
        "resourceSpans[0].scopeSpans[0].spans[1].attributes.gen_ai.tool.call.arguments"
    )
    assert "not valid JSON" in error.problem and "CANARY" not in str(error)


def test_child_chat_span_openinference_and_langgraph_texts(tmp_path: Path) -> None:
    from tests.otel_agent import tool_agent_traces

    rows = [{"case_id": "window-40-days", "text": "the answer", "steps": [[("t", {}, False)]]}]
    for convention, text_on in (
        ("genai", "chat"),
        ("openinference", "openinference"),
        ("genai", "langgraph"),
    ):
        path = tmp_path / f"{text_on}.json"
        path.write_text(otlp_json(tool_agent_traces(rows, convention=convention, text_on=text_on)))
        (got,), _ = outputs_of(str(path))
        assert got.output == "the answer", text_on
        assert got.trajectory is not None and [c.tool for c in got.trajectory.calls] == ["t"]
