"""Record every scenario through one real framework setup: its traces as the real OTLP exporter
sends them, and its own conversation as ground truth.

    python -m tests.frameworks.record SETUP OUTDIR --model-url URL

runs in a fresh process (instrumentors and tracer providers are global) and writes into OUTDIR:

- `traces.pb`: the raw bodies the real `OTLPSpanExporter` (OTLP/HTTP protobuf) POSTed to a tiny
  receiver started here, concatenated: one valid, merged `ExportTraceServiceRequest`;
- `traces.json`: the same requests as OTLP/JSON, one request per line (`MessageToJson`);
- `logs.pb` / `logs.json`: likewise for OTLP log records, when the setup emitted any (the
  OpenTelemetry GenAI event mode puts content there, not in the trace);
- `messages.jsonl`: one `{"case_id", "messages"}` line per scenario, the framework's own
  conversation in its native format (`messages_plain.jsonl` too for LangGraph);
- `notes.json`: the instrumentation, its content mode, how the case id was attached.

With `--conversations` it records the multi-turn conversations instead (`converse.py`); with
`--sessions` the same conversations one trace per user turn, tied by a session id (`sessions.py`).

Each case runs inside a root span `case` with `assay.case_id` opened with the OpenTelemetry API;
every instrumentation here starts its spans under the current context, so the whole case is
one trace (`notes.json` says so per setup). The exporter flushes after each case. URL is the
model server's root (`tests.frameworks.model_server`); without `--model-url` one is started here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.frameworks.loops import MAX_TURNS, Messages, agent_for, chat_turn, instrument_openai
from tests.frameworks.scenarios import (
    ANTHROPIC_MODEL,
    INSTRUCTIONS,
    MODEL,
    SCENARIOS,
    ToolFailure,
    anthropic_tools,
    chat_tools,
    run_tool,
)
from tests.frameworks.telemetry import Telemetry

CLEARED_ENV_PREFIXES = (
    "OTEL_",
    "OPENINFERENCE_",
    "ANTHROPIC_OPEN_TELEMETRY",
    "OPENAI_AGENTS_",
    "LANGCHAIN_",
    "LANGSMITH_",
)
"""Variables from the caller's environment that would change what a setup records."""


@dataclass(frozen=True)
class Setup:
    """One framework with one instrumentation and content mode.

    Attributes:
        content_in: The recording the content (and so `CANARY`) goes to, None when it is off.
    """

    framework: str
    instrumentation: str
    content: str
    content_in: str | None
    env: dict[str, str] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)


_CASE_ID_NOTE = (
    "root span 'case' opened with the OpenTelemetry API around the run "
    "(tracer.start_as_current_span('case', attributes={'assay.case_id': NAME})); every span of "
    "the instrumentation nests under it: one trace per case, 'case' its only root"
)
_GENAI_LATEST = "gen_ai_latest_experimental"
_AGENTS = "openai-agents (Runner.run, Responses API, function tools)"
_AGENTS_NOTES = {
    "agents_tracing": "the Agents SDK's own trace processors (its OpenAI backend exporter) are "
    "removed first: set_trace_processors([])",
    "tool_errors": "the failing tool raises; failure_error_function returns "
    "'Error running tool: <exception>' to the model (the SDK's default text hides the "
    "exception); the SDK marks its function span with the error either way",
}
_AGENTS_GENAI = "opentelemetry-instrumentation-openai-agents-v2 (OpenAIAgentsInstrumentor)"
_AGENTS_GENAI_NOTES = {
    **_AGENTS_NOTES,
    "observed": "execute_tool spans carry no gen_ai.tool.call.id (the call ids are only in "
    "messages.jsonl); a chat span's gen_ai.output.messages renders function calls as text "
    "parts holding the Python repr 'ResponseFunctionToolCall(...)', and its "
    "gen_ai.input.messages holds only the user message on every turn; no system instructions; "
    "server.address/port are the defaults api.openai.com:443; turn/task spans are named "
    "'unknown'; a failed tool is status ERROR, description 'Error running tool (non-fatal): "
    "{... 'error': <exception text>}', no error.type, no event: the exception text is there "
    "even with no_content",
    "content_default": "with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT (or "
    "OTEL_INSTRUMENTATION_OPENAI_AGENTS_CAPTURE_CONTENT) unset this instrumentation DOES capture "
    "content (span_and_event; its event half is a no-op in 0.1.0): off needs no_content/false",
}
_OPENAI = "raw openai client, chat.completions tool loop (the loop runs the tools)"
_OPENAI_V2 = "opentelemetry-instrumentation-openai-v2 (OpenAIInstrumentor)"
_OPENAI_V2_NOTES = {
    "semconv": "opentelemetry-util-genai 1.x always takes the latest experimental GenAI "
    "conventions (is_experimental_mode() is True) whatever OTEL_SEMCONV_STABILITY_OPT_IN says "
    "(set anyway, as documented); OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT takes "
    "no_content/span_only/event_only/span_and_event ('true' warns and captures nothing)",
    "tool_spans": "none: openai-v2 traces the client's calls only",
    "observed": "call ids only inside the messages: output parts {type: tool_call, id, name, "
    "arguments}, input parts {type: tool_call_response, id, response}; the system prompt is a "
    "role 'system' input message",
    "tool_errors": "the failing tool's error goes back as a `tool` message 'Error: ...' "
    "(Chat Completions has no error flag)",
}

SETUPS: dict[str, Setup] = {
    "agents-openinference": Setup(
        _AGENTS,
        "openinference-instrumentation-openai-agents (OpenAIAgentsInstrumentor)",
        "on (TraceConfig defaults: nothing hidden)",
        "traces",
        notes={
            **_AGENTS_NOTES,
            "observed": "spans: 'Agent workflow' (AGENT) > 'Agent workflow' (CHAIN) > "
            "'support-agent' (AGENT) > 'turn' (CHAIN) > 'response' (LLM) and one TOOL span per "
            "call, named after the tool; TOOL spans carry no call id (LLM spans do, in "
            "llm.output_messages.N.message.tool_calls.M.tool_call.id and "
            "llm.input_messages.N.message.tool_call_id); a failed tool is status ERROR with "
            "the exception text in the description, no exception event",
        },
    ),
    "agents-genai": Setup(
        _AGENTS,
        _AGENTS_GENAI,
        "on, in span attributes (span_only)",
        "traces",
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"},
        _AGENTS_GENAI_NOTES,
    ),
    "agents-genai-nocontent": Setup(
        _AGENTS,
        _AGENTS_GENAI,
        "off (no_content)",
        None,
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "no_content"},
        _AGENTS_GENAI_NOTES,
    ),
    "langgraph-openinference": Setup(
        "langgraph.prebuilt create_react_agent + langchain-openai ChatOpenAI (Chat Completions)",
        "openinference-instrumentation-langchain (LangChainInstrumentor)",
        "on (TraceConfig defaults: nothing hidden)",
        "traces",
        notes={
            "tool_errors": "ToolNode(tools, handle_tool_errors=True): the failing tool raises; "
            "its ToolMessage has status 'error', content 'Error: ToolFailure(...)'",
            "observed": "each parallel call is its own 'tools' CHAIN span (a LangGraph Send) "
            "with a TOOL child, overlapping in time; TOOL spans carry no call id attribute (the "
            "ToolMessage in output.value has tool_call_id; LLM spans have "
            "llm.*_messages.N.message.tool_calls.M.tool_call.id); a one-argument tool's "
            "input.value is the bare value, not JSON; a failed tool is a TOOL span with status "
            "ERROR and an exception event, its 'tools' parent OK",
            "messages": "messages.jsonl: langchain_core.messages.messages_to_dict (type/data); "
            "messages_plain.jsonl: [m.model_dump() for m in state['messages']]",
        },
    ),
    "openai-v2-attributes": Setup(
        _OPENAI,
        _OPENAI_V2,
        "on, in span attributes (span_only)",
        "traces",
        {
            "OTEL_SEMCONV_STABILITY_OPT_IN": _GENAI_LATEST,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only",
        },
        _OPENAI_V2_NOTES,
    ),
    "openai-v2-events": Setup(
        _OPENAI,
        _OPENAI_V2,
        "on, in events (event_only): OTLP log records in logs.pb / logs.json, not the trace",
        "logs",
        {
            "OTEL_SEMCONV_STABILITY_OPT_IN": _GENAI_LATEST,
            "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "event_only",
        },
        {
            **_OPENAI_V2_NOTES,
            "events": "one OTLP log record per model call, event_name "
            "gen_ai.client.inference.operation.details, its trace_id/span_id those of the chat "
            "span; the messages are structured log attributes (AnyValue kvlists, not JSON "
            "strings); exported by the real OTLPLogExporter",
        },
    ),
    "openai-v2-nocontent": Setup(
        _OPENAI,
        _OPENAI_V2,
        "off (its default: no content variable set)",
        None,
        notes=_OPENAI_V2_NOTES,
    ),
    "anthropic": Setup(
        "anthropic SDK (Anthropic.messages.create) tool loop (the loop runs the tools)",
        "the anthropic SDK's own OpenTelemetry spans (2.x; no instrumentation package)",
        "on (ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=content)",
        "traces",
        {"ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE": "content"},
        {
            "tool_errors": "the failing tool's tool_result block has is_error: true; the trace "
            "does not show it (its tool_call_response part has no error flag)",
            "observed": "one 'anthropic.messages.create' CLIENT span per call; call ids only in "
            "gen_ai.output.messages / gen_ai.input.messages parts; the system prompt in "
            "gen_ai.system_instructions",
        },
    ),
}
ALL_SETUPS: tuple[str, ...] = tuple(SETUPS)


def _configure_environment(setup: Setup) -> None:
    for name in list(os.environ):
        if name.startswith(CLEARED_ENV_PREFIXES):
            del os.environ[name]
    os.environ.update(setup.env)
    os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


# --- OpenAI Agents SDK ------------------------------------------------------------------------


def _record_agents(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], None]:
    from agents import Runner

    from tests.frameworks.scenarios import TOOLS

    agent = agent_for(setup, telemetry, model_url, TOOLS)

    async def run_all() -> dict[str, Messages]:
        conversations = {}
        for name, scenario in SCENARIOS.items():
            with telemetry.case(name):
                result = await Runner.run(agent, scenario.prompt, max_turns=MAX_TURNS)
            conversations[name] = [dict(item) for item in result.to_input_list()]
        return conversations

    return asyncio.run(run_all()), None


# --- LangGraph ---------------------------------------------------------------------------------


def _record_langgraph(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], dict[str, Messages]]:
    from langchain_core.messages import messages_to_dict
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.prebuilt import ToolNode, create_react_agent
    from openinference.instrumentation.langchain import LangChainInstrumentor

    from tests.frameworks.scenarios import TOOLS

    LangChainInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
    model = ChatOpenAI(model=MODEL, base_url=f"{model_url}/v1", api_key="sk-test", max_retries=0)
    tools = ToolNode(
        [StructuredTool.from_function(t) for t in TOOLS.values()], handle_tool_errors=True
    )
    with warnings.catch_warnings():  # moved to langchain.agents; the brief is langgraph.prebuilt
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, tools, prompt=INSTRUCTIONS)
    native: dict[str, Messages] = {}
    plain: dict[str, Messages] = {}
    for name, scenario in SCENARIOS.items():
        with telemetry.case(name):
            state = agent.invoke(
                {"messages": [("user", scenario.prompt)]}, {"recursion_limit": 2 * MAX_TURNS}
            )
        native[name] = messages_to_dict(state["messages"])
        plain[name] = [m.model_dump() for m in state["messages"]]
    return native, plain


# --- raw openai client -------------------------------------------------------------------------


def _record_openai(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], None]:
    client = instrument_openai(telemetry, model_url)
    conversations = {}
    for name, scenario in SCENARIOS.items():
        messages: Messages = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": scenario.prompt},
        ]
        with telemetry.case(name):
            chat_turn(client, messages, chat_tools())
        conversations[name] = messages
    return conversations, None


# --- anthropic ---------------------------------------------------------------------------------


def _record_anthropic(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], None]:
    import anthropic

    client = anthropic.Anthropic(base_url=model_url, api_key="sk-ant-test", max_retries=0)
    conversations = {}
    for name, scenario in SCENARIOS.items():
        messages: Messages = [{"role": "user", "content": scenario.prompt}]
        with telemetry.case(name):
            for _ in range(MAX_TURNS):
                reply = client.messages.create(
                    model=ANTHROPIC_MODEL,
                    max_tokens=1024,
                    system=INSTRUCTIONS,
                    tools=anthropic_tools(),  # type: ignore[arg-type]
                    messages=messages,  # type: ignore[arg-type]
                )
                content: list[dict[str, Any]] = []
                results: list[dict[str, Any]] = []
                for block in reply.content:
                    if block.type == "text":
                        content.append({"type": "text", "text": block.text})
                    elif block.type == "tool_use":
                        content.append(
                            {
                                "type": "tool_use",
                                "id": block.id,
                                "name": block.name,
                                "input": block.input,
                            }
                        )
                        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.id}
                        try:
                            result["content"] = run_tool(block.name, dict(block.input))
                        except ToolFailure as error:
                            result.update(content=f"Error: {error}", is_error=True)
                        results.append(result)
                messages.append({"role": "assistant", "content": content})
                if not results:
                    break
                messages.append({"role": "user", "content": results})
        conversations[name] = messages
    return conversations, None


Recorder = Callable[[str, Telemetry, str], tuple[dict[str, Messages], dict[str, Messages] | None]]
RECORDERS: dict[str, Recorder] = {
    "agents-openinference": _record_agents,
    "agents-genai": _record_agents,
    "agents-genai-nocontent": _record_agents,
    "langgraph-openinference": _record_langgraph,
    "openai-v2-attributes": _record_openai,
    "openai-v2-events": _record_openai,
    "openai-v2-nocontent": _record_openai,
    "anthropic": _record_anthropic,
}


def _write_jsonl(path: Path, conversations: dict[str, Messages]) -> None:
    lines = [
        json.dumps({"case_id": name, "messages": messages}, default=str) + "\n"
        for name, messages in conversations.items()
    ]
    path.write_text("".join(lines), encoding="utf-8")


def record(setup_name: str, out: Path, model_url: str, *, recording: str = "scenarios") -> None:
    """Run every scenario (every conversation, with `recording` "conversations"; one trace per
    turn, with "sessions") through `setup_name` and write the recordings into `out`."""
    setup = SETUPS[setup_name]
    _configure_environment(setup)
    out.mkdir(parents=True, exist_ok=True)
    telemetry = Telemetry(setup_name)
    recorder = RECORDERS[setup_name]
    case_note = _CASE_ID_NOTE
    if recording == "conversations":
        from tests.frameworks.converse import CONVERSATION_RECORDERS

        recorder = CONVERSATION_RECORDERS[setup_name]
    elif recording == "sessions":
        from tests.frameworks.sessions import SESSION_CASE_NOTES, SESSION_RECORDERS

        recorder, case_note = SESSION_RECORDERS[setup_name], SESSION_CASE_NOTES[setup_name]
    try:
        url = model_url.rstrip("/").removesuffix("/v1")
        native, plain = recorder(setup_name, telemetry, url)
    finally:
        telemetry.shutdown()
    counts = telemetry.write(out)
    _write_jsonl(out / "messages.jsonl", native)
    if plain is not None:
        _write_jsonl(out / "messages_plain.jsonl", plain)
    notes = {
        "setup": setup_name,
        "framework": setup.framework,
        "instrumentation": setup.instrumentation,
        "content": setup.content,
        "env": setup.env,
        "content_in": setup.content_in,
        "case_id": case_note,
        "requests": counts,
        **setup.notes,
    }
    (out / "notes.json").write_text(json.dumps(notes, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.frameworks.record", description=__doc__)
    parser.add_argument("setup", choices=ALL_SETUPS)
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--model-url", help="the model server's root URL (default: start one)")
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument(
        "--conversations", action="store_true", help="record the conversations instead"
    )
    kinds.add_argument(
        "--sessions",
        action="store_true",
        help="record the conversations one trace per user turn, tied by a session id",
    )
    args = parser.parse_args(argv)
    server: AbstractContextManager[Any]
    if args.model_url:
        server = nullcontext(None)
    else:
        from tests.frameworks.model_server import running_model_server

        server = running_model_server()
    with server as running:
        url = args.model_url or running.url
        recording = (
            "conversations" if args.conversations else "sessions" if args.sessions else "scenarios"
        )
        record(args.setup, args.outdir, url, recording=recording)
    return 0


if __name__ == "__main__":
    sys.exit(main())
