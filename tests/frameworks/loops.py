"""What the recorders share: the support agent of the OpenAI Agents SDK, and the raw `openai`
client's tool loop (one user turn: ask the model until it answers without calls, running the
calls it asks for)."""

from __future__ import annotations

import json
from typing import Any

from tests.frameworks.scenarios import INSTRUCTIONS, MODEL, ToolFailure, run_tool
from tests.frameworks.telemetry import Telemetry

MAX_TURNS = 10
Messages = list[dict[str, Any]]


def _agents_error(context: Any, error: Exception) -> str:
    return f"Error running tool: {error}"


def agent_for(setup: str, telemetry: Telemetry, model_url: str, tools: dict[str, Any]) -> Any:
    """The support agent with `tools`, its SDK instrumented for `setup`."""
    from agents import Agent, function_tool, set_trace_processors
    from agents.models.openai_responses import OpenAIResponsesModel
    from openai import AsyncOpenAI

    set_trace_processors([])
    if setup == "agents-openinference":
        from openinference.instrumentation.openai_agents import (
            OpenAIAgentsInstrumentor as OpenInferenceAgents,
        )

        OpenInferenceAgents().instrument(tracer_provider=telemetry.tracer_provider)
    else:
        from opentelemetry.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        OpenAIAgentsInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)

    client = AsyncOpenAI(base_url=f"{model_url}/v1", api_key="sk-test", max_retries=0)
    return Agent(
        name="support-agent",
        instructions=INSTRUCTIONS,
        model=OpenAIResponsesModel(model=MODEL, openai_client=client),
        tools=[function_tool(t, failure_error_function=_agents_error) for t in tools.values()],
    )


def instrument_openai(telemetry: Telemetry, model_url: str) -> Any:
    """A raw `openai` client, the openai-v2 instrumentation on."""
    from openai import OpenAI
    from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor

    OpenAIInstrumentor().instrument(  # type: ignore[no-untyped-call]
        tracer_provider=telemetry.tracer_provider, logger_provider=telemetry.logger_provider
    )
    return OpenAI(base_url=f"{model_url}/v1", api_key="sk-test", max_retries=0)


def chat_turn(client: Any, messages: Messages, tools: list[dict[str, Any]]) -> None:
    """Ask the model until it answers without calls, running the calls it asks for; appends
    every assistant and tool message to `messages`."""
    for _ in range(MAX_TURNS):
        completion = client.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        reply = completion.choices[0].message
        assistant: dict[str, Any] = {"role": "assistant", "content": reply.content}
        calls = [call for call in reply.tool_calls or [] if call.type == "function"]
        if calls:
            assistant["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
                for call in calls
            ]
        messages.append(assistant)
        if not calls:
            return
        for call in calls:
            try:
                result = run_tool(call.function.name, json.loads(call.function.arguments))
            except ToolFailure as error:
                result = f"Error: {error}"
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result})
