"""Record the conversations (`scenarios.CONVERSATIONS`): several user turns in one case, each
turn the agent's own tool loop, the whole conversation inside the case's root span.

    python -m tests.frameworks.record SETUP OUTDIR --conversations --model-url URL

- `openai-v2-attributes`: the raw `openai` client's chat completions, the message list growing
  turn after turn (its ground truth, `messages.jsonl`, is that list); openai-v2 traces each
  completion, with the messages it sent (`gen_ai.input.messages`).
- `agents-openinference`: one `Runner.run` per user turn, its input the last run's
  `to_input_list()` and the next user message; each run is an `Agent workflow` span.
"""

from __future__ import annotations

import asyncio
from typing import Any

from tests.frameworks.loops import MAX_TURNS, Messages, agent_for, chat_turn, instrument_openai
from tests.frameworks.record import Recorder
from tests.frameworks.scenarios import (
    CONVERSATION_TOOLS,
    CONVERSATIONS,
    INSTRUCTIONS,
    chat_tools,
)
from tests.frameworks.telemetry import Telemetry


def _converse_openai(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], None]:
    client = instrument_openai(telemetry, model_url)
    recorded = {}
    for name, conversation in CONVERSATIONS.items():
        messages: Messages = [{"role": "system", "content": INSTRUCTIONS}]
        with telemetry.case(name):
            for request in conversation.requests:
                messages.append({"role": "user", "content": request})
                chat_turn(client, messages, chat_tools(CONVERSATION_TOOLS))
        recorded[name] = messages
    return recorded, None


def _converse_agents(
    setup: str, telemetry: Telemetry, model_url: str
) -> tuple[dict[str, Messages], None]:
    from agents import Runner

    agent = agent_for(setup, telemetry, model_url, CONVERSATION_TOOLS)

    async def run_all() -> dict[str, Messages]:
        recorded = {}
        for name, conversation in CONVERSATIONS.items():
            items: list[Any] = []
            with telemetry.case(name):
                for request in conversation.requests:
                    items.append({"role": "user", "content": request})
                    result = await Runner.run(agent, items, max_turns=MAX_TURNS)
                    items = [dict(item) for item in result.to_input_list()]
            recorded[name] = items
        return recorded

    return asyncio.run(run_all()), None


CONVERSATION_RECORDERS: dict[str, Recorder] = {
    "openai-v2-attributes": _converse_openai,
    "agents-openinference": _converse_agents,
}
CONVERSATION_SETUPS: tuple[str, ...] = tuple(CONVERSATION_RECORDERS)
