"""Message lists in a JSONL line's `messages`: which format they are in, and their record.

The formats are told apart by shape, most specific first: OpenAI Responses items (typed items,
`input_text` / `output_text` parts), Anthropic Messages (`tool_use` / `tool_result` blocks),
LangChain message dicts (`type` without `role`), else OpenAI Chat messages. `--outputs-format`
can name one; a list that does not read as the named format is an input error.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any, Final

from assay.intake import anthropic, langchain, openai_chat, openai_responses
from assay.intake.conversation import MessagesError
from assay.intake.record import AgentRecord

DETECTION_ORDER: Final[tuple[ModuleType, ...]] = (
    openai_responses,
    anthropic,
    langchain,
    openai_chat,
)
READERS: Final[dict[str, ModuleType]] = {reader.FORMAT: reader for reader in DETECTION_ORDER}
"""Each message-list format by its public name (`--outputs-format`)."""


def reader_of(messages: Sequence[Any], named: str | None = None) -> ModuleType:
    """The reader of a message list: the named format's, else the first whose shape fits."""
    if named is not None and named in READERS:
        return READERS[named]
    return next((r for r in DETECTION_ORDER if r.detect(messages)), openai_chat)


def final_text(messages: Sequence[Any]) -> str | None:
    """The agent's last answer in a message list of any format (None: there is none)."""
    text: str | None = reader_of(messages).final_text(messages)
    return text


def read(messages: Sequence[Any], named: str | None = None) -> AgentRecord:
    """The record of a message list.

    Raises:
        MessagesError: the list does not read as its format (naming the field).
    """
    reader = reader_of(messages, named)
    if named is not None and reader is not openai_chat and not reader.detect(messages):
        found = reader_of(messages).FORMAT
        raise MessagesError("messages", f"not {named} messages (they read as {found})")
    record: AgentRecord = reader.read(messages)
    return record


__all__ = ["READERS", "MessagesError", "final_text", "read", "reader_of"]
