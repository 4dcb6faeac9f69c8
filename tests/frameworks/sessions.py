"""Record the conversations (`scenarios.CONVERSATIONS`) as real frameworks do when each user turn
is its own trace, the traces tied together by a session id set the way each framework's docs say.

    python -m tests.frameworks.record SETUP OUTDIR --sessions --model-url URL

- `agents-openinference`: one `Runner.run` per user turn, each inside
  `openinference.instrumentation.using_session(SESSION_ID)` (OpenInference puts `session.id` on
  every span it starts) and inside a root span `case` carrying `assay.case_id` opened for that
  turn: one trace per turn, each naming the case.
- `langgraph-openinference`: `create_react_agent` with a checkpointer, one `invoke` per user
  turn with only the new user message and `{"configurable": {"thread_id": NAME}}` (LangGraph
  keeps the conversation in the thread; the OpenInference LangChain instrumentation writes the
  thread id as `session.id`): one trace per turn, no case span: read with
  `--case-attribute session.id`.
"""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

from tests.frameworks.loops import MAX_TURNS, Messages, agent_for
from tests.frameworks.record import Recorder
from tests.frameworks.scenarios import CONVERSATION_TOOLS, CONVERSATIONS, INSTRUCTIONS, MODEL
from tests.frameworks.telemetry import Telemetry


def session_id(name: str) -> str:
    """The session id the Agents SDK recording gives conversation `name` (not its case id)."""
    return f"session-of-{name}"


def _sessions_agents(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], None]:
    from agents import Runner
    from openinference.instrumentation import using_session

    agent = agent_for(setup, telemetry, model_url, CONVERSATION_TOOLS)

    async def run_all() -> dict[str, Messages]:
        recorded = {}
        for name, conversation in CONVERSATIONS.items():
            items: list[Any] = []
            for request in conversation.requests:
                items.append({"role": "user", "content": request})
                with telemetry.case(name), using_session(session_id(name)):
                    result = await Runner.run(agent, items, max_turns=MAX_TURNS)
                items = [dict(item) for item in result.to_input_list()]
            recorded[name] = items
        return recorded

    return asyncio.run(run_all()), None


def _sessions_langgraph(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], dict[str, Messages]]:
    from langchain_core.messages import messages_to_dict
    from langchain_core.tools import StructuredTool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import ToolNode, create_react_agent
    from openinference.instrumentation.langchain import LangChainInstrumentor

    LangChainInstrumentor().instrument(tracer_provider=telemetry.tracer_provider)
    model = ChatOpenAI(model=MODEL, base_url=f"{model_url}/v1", api_key="sk-test", max_retries=0)
    tools = ToolNode(
        [StructuredTool.from_function(t) for t in CONVERSATION_TOOLS.values()],
        handle_tool_errors=True,
    )
    with warnings.catch_warnings():  # moved to langchain.agents; the brief is langgraph.prebuilt
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, tools, prompt=INSTRUCTIONS, checkpointer=InMemorySaver())
    native: dict[str, Messages] = {}
    plain: dict[str, Messages] = {}
    for name, conversation in CONVERSATIONS.items():
        config: Any = {"configurable": {"thread_id": name}, "recursion_limit": 2 * MAX_TURNS}
        for request in conversation.requests:
            state = agent.invoke({"messages": [("user", request)]}, config)
            telemetry.flush()
        native[name] = messages_to_dict(state["messages"])
        plain[name] = [m.model_dump() for m in state["messages"]]
    return native, plain


SESSION_RECORDERS: dict[str, Recorder] = {
    "agents-openinference": _sessions_agents,
    "langgraph-openinference": _sessions_langgraph,
}
SESSION_SETUPS: tuple[str, ...] = tuple(SESSION_RECORDERS)
SESSION_CASE_NOTES: dict[str, str] = {
    "agents-openinference": "one trace per user turn: each Runner.run inside a root span 'case' "
    "with assay.case_id opened for that turn and inside using_session('session-of-NAME'); "
    "session.id on every OpenInference span, not on 'case'",
    "langgraph-openinference": "one trace per user turn (agent.invoke with the new user message, "
    "configurable thread_id NAME, an InMemorySaver checkpointer); no case span: the case id is "
    "the thread id, which OpenInference writes as session.id on the graph's spans",
}
"""How each session recording attaches its case id (notes.json `case_id`)."""
