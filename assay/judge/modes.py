"""Structured-output modes: the ladder a judge steps down, the `response_format` of each, and the
memory of what an endpoint answered in.

The reply is requested in the strongest form the endpoint accepts, in this order
(`assay.judge.port.MODES`):

1. `json_schema` — `response_format={"type": "json_schema", "json_schema": {"name": "verdict",
   "strict": true, "schema": …}}` (OpenAI, vLLM, Ollama);
2. `json_object` — `response_format={"type": "json_object", "schema": …}` (llama.cpp's server,
   which constrains generation to the schema; elsewhere it at least forces JSON);
3. `prompt` — no `response_format`; the prompt itself asks for the JSON object.

The prompt asks for the same JSON in every mode and every reply is parsed strictly
(`assay.judge.replies`), so the mode changes how sure we are to get JSON, never its meaning. When
the adapter steps down is its fallback rule (`assay.judge.openai_adapter`).
"""

from __future__ import annotations

import threading
from typing import Any

from assay.judge.port import MODES, Mode


def next_mode(mode: Mode) -> Mode | None:
    index = MODES.index(mode)
    return MODES[index + 1] if index + 1 < len(MODES) else None


def structured_format(mode: Mode, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The `response_format` asking for `schema` in `mode` (None: ask in the prompt only)."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {"name": name, "strict": True, "schema": schema},
        }
    if mode == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


class ModeMemory:
    """The structured-output mode an endpoint answered in; it only ever moves down the ladder.

    One per adapter unless shared on purpose: judges built from one configuration share one
    (`blocks.judge_settings`), so later calls start from what an earlier call learned.
    """

    def __init__(self) -> None:
        self._mode: Mode | None = None
        self._lock = threading.Lock()

    @property
    def mode(self) -> Mode | None:
        """The remembered mode; None while the endpoint answered in the first mode."""
        with self._lock:
            return self._mode

    def step_down(self, mode: Mode) -> bool:
        """Remember `mode` if it is lower than what is known; True when the memory moved."""
        with self._lock:
            known = self._mode or MODES[0]
            if MODES.index(mode) <= MODES.index(known):
                return False
            self._mode = mode
            return True
