"""The scripted agent scenarios that every framework setup runs: one case per scenario.

A scenario is the user's prompt (carrying the case marker `[case:NAME]` that the model server
reads), the tool calls the scripted model makes turn by turn (`steps`: the calls of one model
response, several in one step = parallel calls) and its final text. The tools are plain Python
functions that each framework wraps its own way; `lookup_order` raises for `MISSING_ORDER`.

`CANARY` is in every final text, every argument value, every tool result (the failing tool's
error message too), the prompts and the system instructions, so a test can tell whether content
reached a recording.

`EXPECTED` is the same as plain data for test authors: per case id, the prompt, the steps
(`[[{"name", "arguments", "fails"}]]`), the final text and the `(input, output)` token usage the
server reports for each model turn; `EXPECTED_CALLS` flattens the calls in order.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

CANARY = "CANARY-7f3a"
MODEL = "gpt-4.1-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-5"
INSTRUCTIONS = f"You are the support agent of shop {CANARY}. Use the tools to help the customer."
TOOL_SECONDS = 0.05
"""How long each tool runs: long enough that calls run together visibly overlap in time."""

ORDER = f"{CANARY}-1001"
MISSING_ORDER = f"{CANARY}-0000"
AMOUNT = f"42.00 EUR {CANARY}"
WRONG_AMOUNT = f"420.00 EUR {CANARY}"
EMAIL = f"ada.{CANARY}@example.com"
USER = f"user-{CANARY}"

CASE_MARKER = re.compile(r"\[case:([a-z_]+)\]")


class ToolFailure(Exception):
    """What a tool raises when it fails (its message carries the canary)."""


def lookup_order(order_id: str) -> str:
    """Look up an order by its id: its status and total."""
    time.sleep(TOOL_SECONDS)
    if order_id == MISSING_ORDER:
        raise ToolFailure(f"no order {order_id} in the order database")
    return json.dumps({"order_id": order_id, "status": "delivered", "total": AMOUNT})


def refund(order_id: str, amount: str) -> str:
    """Refund an amount (with its currency) on an order."""
    time.sleep(TOOL_SECONDS)
    return f"refunded {amount} on order {order_id}"


def send_email(to: str) -> str:
    """Send the customer a confirmation email."""
    time.sleep(TOOL_SECONDS)
    return f"confirmation email sent to {to}"


def delete_account(user_id: str) -> str:
    """Delete a customer's account."""
    time.sleep(TOOL_SECONDS)
    return f"account {user_id} deleted"


TOOLS: dict[str, Callable[..., str]] = {
    "lookup_order": lookup_order,
    "refund": refund,
    "send_email": send_email,
    "delete_account": delete_account,
}

_PARAMETERS: dict[str, dict[str, str]] = {
    "get_order": {"order_id": "The order id."},
    "lookup_order": {"order_id": "The order id."},
    "refund": {"order_id": "The order id.", "amount": "The amount, with its currency."},
    "send_email": {"to": "The email address."},
    "delete_account": {"user_id": "The user id."},
}


def get_order(order_id: str) -> str:
    """Get an order by its id: its status and total."""
    time.sleep(TOOL_SECONDS)
    return json.dumps({"order_id": order_id, "status": "shipped", "total": AMOUNT})


CONVERSATION_TOOLS: dict[str, Callable[..., str]] = {"get_order": get_order}
"""The tools of the conversations (kept apart so that the one-answer recordings stay as they
were)."""
ALL_TOOLS = {**TOOLS, **CONVERSATION_TOOLS}


def json_schema(name: str) -> dict[str, Any]:
    """The JSON schema of a tool's arguments (every one a required string)."""
    properties = {
        param: {"type": "string", "description": text} for param, text in _PARAMETERS[name].items()
    }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def chat_tools(tools: dict[str, Callable[..., str]] = TOOLS) -> list[dict[str, Any]]:
    """The tools as OpenAI Chat Completions `tools`."""
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": (tool.__doc__ or "").strip(),
                "parameters": json_schema(name),
            },
        }
        for name, tool in tools.items()
    ]


def anthropic_tools() -> list[dict[str, Any]]:
    """The tools as Anthropic Messages `tools`."""
    return [
        {
            "name": name,
            "description": (tool.__doc__ or "").strip(),
            "input_schema": json_schema(name),
        }
        for name, tool in TOOLS.items()
    ]


@dataclass(frozen=True)
class Call:
    """One tool call the scripted model makes."""

    name: str
    arguments: dict[str, str]
    fails: bool = False


@dataclass(frozen=True)
class Scenario:
    """One case: the prompt, the model's tool-call steps, then its final text."""

    name: str
    request: str
    steps: tuple[tuple[Call, ...], ...]
    final_text: str

    @property
    def prompt(self) -> str:
        """The user message, with the case marker the model server selects the script by."""
        return f"[case:{self.name}] {self.request}"

    @property
    def calls(self) -> list[Call]:
        """Every call, in order."""
        return [call for step in self.steps for call in step]


def usage_for(turn: int) -> tuple[int, int]:
    """The (input, output) tokens the server reports for a case's model turn `turn` (from 0)."""
    return 100 + 10 * turn, 20 + turn


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """Run a tool by name (raises `ToolFailure` as the tool does)."""
    return ALL_TOOLS[name](**arguments)


_LOOKUP = Call("lookup_order", {"order_id": ORDER})
_REFUND = Call("refund", {"order_id": ORDER, "amount": AMOUNT})

SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario(
            "correct",
            f"Order {ORDER} arrived broken. Please refund it.",
            ((_LOOKUP,), (_REFUND,)),
            f"I refunded {AMOUNT} on order {ORDER}.",
        ),
        Scenario(
            "wrong_order",
            f"Order {ORDER} arrived broken. Please refund it.",
            ((_REFUND,), (_LOOKUP,)),
            f"I refunded {AMOUNT} on order {ORDER} and checked the order afterwards.",
        ),
        Scenario(
            "wrong_argument",
            f"Order {ORDER} arrived broken. Please refund it.",
            ((_LOOKUP,), (Call("refund", {"order_id": ORDER, "amount": WRONG_AMOUNT}),)),
            f"I refunded {WRONG_AMOUNT} on order {ORDER}.",
        ),
        Scenario(
            "parallel",
            f"Where is order {ORDER}? Also email me a confirmation at {EMAIL}.",
            ((_LOOKUP, Call("send_email", {"to": EMAIL})),),
            f"Order {ORDER} was delivered, and I emailed {EMAIL}.",
        ),
        Scenario(
            "failing_tool",
            f"Where is order {MISSING_ORDER}?",
            ((Call("lookup_order", {"order_id": MISSING_ORDER}, fails=True),),),
            f"Sorry, I could not find order {MISSING_ORDER}.",
        ),
        Scenario(
            "forbidden_tool",
            f"I am {USER} and I am unhappy with my refund.",
            ((Call("delete_account", {"user_id": USER}),),),
            f"I deleted the account {USER}.",
        ),
        Scenario(
            "text_only",
            f"What are the opening hours of shop {CANARY}?",
            (),
            f"We are open from 9 to 17, Monday to Friday ({CANARY}).",
        ),
    )
}

CASE_IDS: tuple[str, ...] = tuple(SCENARIOS)

EXPECTED: dict[str, dict[str, Any]] = {
    name: {
        "prompt": scenario.prompt,
        "steps": [
            [{"name": c.name, "arguments": dict(c.arguments), "fails": c.fails} for c in step]
            for step in scenario.steps
        ],
        "final_text": scenario.final_text,
        "usage": [list(usage_for(turn)) for turn in range(len(scenario.steps) + 1)],
    }
    for name, scenario in SCENARIOS.items()
}

EXPECTED_CALLS: dict[str, list[dict[str, Any]]] = {
    name: [{"name": c.name, "arguments": dict(c.arguments)} for c in scenario.calls]
    for name, scenario in SCENARIOS.items()
}


@dataclass(frozen=True)
class Conversation:
    """A case of several user turns: each a `Scenario` (its request, the calls the model makes
    in that turn, its answer). Only the first request carries the case marker: every later
    request resends the conversation, marker included."""

    name: str
    turns: tuple[Scenario, ...]

    @property
    def requests(self) -> list[str]:
        """The user messages, in order."""
        return [self.turns[0].prompt, *(turn.request for turn in self.turns[1:])]


_GET_ORDER = Call("get_order", {"order_id": ORDER})
_SUPPORT = (
    Scenario(
        "support",
        f"Hello, I have a question about an order from shop {CANARY}.",
        (),
        f"Hello! Which order is it about? ({CANARY})",
    ),
    Scenario(
        "support",
        f"Order {ORDER}. Where is it?",
        ((_GET_ORDER,),),
        f"Order {ORDER} has shipped; its total is {AMOUNT}.",
    ),
    Scenario(
        "support",
        "Thanks. Which order number was that again?",
        (),
        f"It was order {ORDER}.",
    ),
)
_SHORT = tuple(replace(turn, name="support_short") for turn in _SUPPORT[:2])
CONVERSATIONS: dict[str, Conversation] = {
    conversation.name: conversation
    for conversation in (
        Conversation("support", _SUPPORT),
        Conversation(
            "support_short", tuple(replace(t, name="support_short") for t in _SUPPORT[:2])
        ),
    )
}
"""`support`: turn 2 calls `get_order` before answering, turns 1 and 3 answer without a call;
`support_short`: the same conversation stopped after turn 2 (a record with fewer turns)."""
