"""A tiny instrumented agent: spans made by the real OpenTelemetry SDK, exported as OTLP.

`agent_traces` replays candidate outputs as an agent would have traced them: one root span per
case carrying `assay.case_id`, the answer in `gen_ai.output.messages`, and two child `chat`
spans sharing the token usage. `otlp_json` encodes finished spans with the SDK's own OTLP
encoder and protobuf's JSON mapping (camelCase keys, base64 ids), as a sandbox would write them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from contextlib import suppress
from typing import Any

from google.protobuf.json_format import MessageToJson
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

START_NS = 1_780_000_000_000_000_000


def _messages(text: str) -> str:
    return json.dumps(
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": text}],
                "finish_reason": "stop",
            }
        ]
    )


def agent_traces(
    outputs: Iterable[Mapping[str, Any]], resource: Mapping[str, str] | None = None
) -> Sequence[ReadableSpan]:
    """Finished spans, one trace per JSONL-style output record."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create(dict(resource or {"service.name": "bot"})))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("assay-tests")
    for n, record in enumerate(outputs):
        start = START_NS + n * 10_000_000_000
        end = start + int(float(record.get("duration_ms", 1)) * 1_000_000)
        usage = record.get("usage") or {}
        root = tracer.start_span(
            "invoke_agent",
            start_time=start,
            attributes={
                "assay.case_id": record["case_id"],
                "gen_ai.output.messages": _messages(record["output"]),
            },
        )
        with_root = _context(root)
        for half in (0, 1):
            chat = tracer.start_span("chat", context=with_root, start_time=start + 1 + half)
            for key in ("input_tokens", "output_tokens"):
                if usage.get(key) is not None:
                    share = usage[key] // 2 if half == 0 else usage[key] - usage[key] // 2
                    chat.set_attribute(f"gen_ai.usage.{key}", share)
            if half == 1 and usage.get("cost_usd") is not None:
                chat.set_attribute("gen_ai.usage.cost", usage["cost_usd"])
            chat.end(end_time=end - 1)
        root.end(end_time=end)
    provider.shutdown()
    return exporter.get_finished_spans()


def _context(span: Any) -> Any:
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def otlp_json(spans: Sequence[ReadableSpan], indent: int | None = 2) -> str:
    """One OTLP/JSON document, as `MessageToJson` writes it."""
    return MessageToJson(encode_spans(spans), indent=indent)


CANARY = "CANARY-otel-7f3a91-private-text"


def traced_agent(
    tracer: Any, question: str, *, fail: bool, tokens: tuple[int, int], cost_usd: float
) -> None:
    """One agent session as an instrumented agent traces it, with `CANARY` in every text the
    conventions define (messages, instructions, tool arguments and results, span names, the
    exception message and the status description)."""
    user = [{"role": "user", "parts": [{"type": "text", "content": f"{CANARY} {question}"}]}]
    with tracer.start_as_current_span(f"invoke_agent {CANARY}") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.input.messages", json.dumps(user))
        root.set_attribute("gen_ai.system_instructions", CANARY)
        root.set_attribute("output.value", CANARY)
        root.add_event(f"thinking {CANARY}", {"detail": CANARY})
        with tracer.start_as_current_span("chat") as chat:
            chat.set_attribute("gen_ai.usage.input_tokens", tokens[0])
            chat.set_attribute("gen_ai.usage.output_tokens", tokens[1])
            chat.set_attribute("gen_ai.usage.cost", cost_usd)
            chat.set_attribute("gen_ai.prompt", CANARY)
            chat.set_attribute("gen_ai.completion", CANARY)
            chat.set_attribute("gen_ai.output.messages", _messages(CANARY))
        with tracer.start_as_current_span("execute_tool lookup") as tool:
            tool.set_attribute("gen_ai.tool.call.arguments", json.dumps({"q": CANARY}))
            tool.set_attribute("gen_ai.tool.call.result", CANARY)
        if fail:
            raise RuntimeError(CANARY)


def run_sessions(tracer: Any, sessions: Iterable[tuple[bool, tuple[int, int], float]]) -> None:
    """Run `traced_agent` once per (fails, tokens, cost); failures are the agent's, not ours."""
    for n, (fail, tokens, cost) in enumerate(sessions):
        with suppress(RuntimeError):
            traced_agent(tracer, f"question {n}", fail=fail, tokens=tokens, cost_usd=cost)


def tool_agent_traces(
    records: Iterable[Mapping[str, Any]], *, convention: str = "genai", text_on: str = "chat"
) -> Sequence[ReadableSpan]:
    """Finished spans of a tool-using agent, one trace per record of `case_id`, `text` and
    `steps` (lists of `(tool, args, failed)`: the calls made together).

    `convention` "genai" writes `execute_tool` spans (a failure as `error.type`), "openinference"
    writes `TOOL` spans under an intermediate agent span (a failure as status ERROR). Before each
    step a model span's output requests its calls (GenAI `tool_call` parts with the call ids;
    OpenInference's flattened `tool_calls`, whose TOOL spans carry no id). The calls of one step
    overlap in time under one parent; steps follow one another. The text is on a
    child `chat` span (`text_on` "chat"), an OpenInference LLM span's flattened output messages
    ("openinference") or the root's LangGraph state in `output.value` ("langgraph").
    """
    from opentelemetry.trace import Status, StatusCode

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "tool-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("assay-tests")
    for n, record in enumerate(records):
        start = START_NS + n * 10_000_000_000
        steps = record["steps"]
        end = start + (len(steps) + 2) * 1_000_000
        root = tracer.start_span(
            "invoke_agent", start_time=start, attributes={"assay.case_id": record["case_id"]}
        )
        parent = root
        if convention == "openinference":
            parent = tracer.start_span("agent", context=_context(root), start_time=start + 1)
            parent.set_attribute("openinference.span.kind", "AGENT")
        for k, step in enumerate(steps):
            base = start + (k + 1) * 1_000_000
            # the model response that requested the step's calls, as the instrumentations
            # record it: GenAI `tool_call` parts, OpenInference flattened `tool_calls`
            ask = tracer.start_span("chat", context=_context(parent), start_time=base - 400_000)
            if convention == "openinference":
                ask.set_attribute("openinference.span.kind", "LLM")
                ask.set_attribute("llm.output_messages.0.message.role", "assistant")
                for j, (tool, args, _failed) in enumerate(step):
                    prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call"
                    ask.set_attribute(f"{prefix}.function.name", tool)
                    ask.set_attribute(f"{prefix}.function.arguments", json.dumps(args))
            else:
                ask.set_attribute("gen_ai.operation.name", "chat")
                parts = [
                    {"type": "tool_call", "id": f"call-{k}-{j}", "name": tool, "arguments": args}
                    for j, (tool, args, _failed) in enumerate(step)
                ]
                ask.set_attribute(
                    "gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": parts}])
                )
            ask.end(end_time=base - 100_000)
            for j, (tool, args, failed) in enumerate(step):
                span = tracer.start_span(
                    f"execute_tool {tool}", context=_context(parent), start_time=base + j
                )
                if convention == "openinference":
                    span.set_attribute("openinference.span.kind", "TOOL")
                    span.set_attribute("tool.name", tool)
                    span.set_attribute("input.value", json.dumps(args))
                    if failed:
                        span.set_status(Status(StatusCode.ERROR))
                else:
                    span.set_attribute("gen_ai.operation.name", "execute_tool")
                    span.set_attribute("gen_ai.tool.name", tool)
                    span.set_attribute("gen_ai.tool.call.id", f"call-{k}-{j}")
                    span.set_attribute("gen_ai.tool.call.arguments", json.dumps(args))
                    if failed:
                        span.set_attribute("error.type", "tool_error")
                span.end(end_time=base + 500_000)
        text = record["text"]
        if text_on == "langgraph":
            state = {
                "messages": [{"type": "human", "content": "q"}, {"type": "ai", "content": text}]
            }
            root.set_attribute("output.value", json.dumps(state))
            answer = tracer.start_span("chat", context=_context(parent), start_time=end - 900_000)
            answer.set_attribute("gen_ai.operation.name", "chat")
            answer.set_attribute("gen_ai.output.messages", _messages(text))
            answer.end(end_time=end - 100)
        else:  # a planning call first, then the answer: the last-ending one is the text
            for said, begin, finish in (
                ("planning", start + 2, start + 500_000),
                (text, end - 900_000, end - 100),
            ):
                chat = tracer.start_span("chat", context=_context(parent), start_time=begin)
                if text_on == "openinference":
                    chat.set_attribute("openinference.span.kind", "LLM")
                    chat.set_attribute("llm.output_messages.0.message.role", "assistant")
                    chat.set_attribute("llm.output_messages.0.message.content", said)
                else:
                    chat.set_attribute("gen_ai.operation.name", "chat")
                    chat.set_attribute("gen_ai.output.messages", _messages(said))
                chat.end(end_time=finish)
        if parent is not root:
            parent.end(end_time=end - 50)
        root.end(end_time=end)
    provider.shutdown()
    return exporter.get_finished_spans()
