"""The judge: a port (`assay.judge.port`), versioned prompts, and one OpenAI-compatible adapter.

The port and the prompts import quickly and are what scorers and flows depend on. The adapter
imports the `openai` SDK (about a second), so it is loaded on first use of `OpenAIJudge` from
this package, not when `assay.judge` is imported; `judge_skip_reason` (whether the environment
configures a judge) needs no SDK. Which judge a run uses is configured in one place: a
JudgeSettings (`blocks/judge_settings.py`, saved or `JudgeSettings.from_env()`).
Nothing here imports Prefect.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from assay.judge.endpoint import judge_skip_reason
from assay.judge.port import (
    BUDGET_BLOCKED,
    JUDGED,
    MALFORMED_REPLY,
    MODES,
    NO_CREDENTIALS,
    NO_JUDGE,
    Judge,
    JudgeRequest,
    Mode,
    Verdict,
    judge_all,
    judge_unavailable,
)
from assay.judge.prompts import MalformedReply, Prompt, PromptError, load_prompt

if TYPE_CHECKING:
    from assay.judge.openai_adapter import OpenAIJudge

_ADAPTER_NAMES = frozenset({"OpenAIJudge"})

__all__ = [
    "BUDGET_BLOCKED",
    "JUDGED",
    "MALFORMED_REPLY",
    "MODES",
    "NO_CREDENTIALS",
    "NO_JUDGE",
    "Judge",
    "JudgeRequest",
    "MalformedReply",
    "Mode",
    "OpenAIJudge",
    "Prompt",
    "PromptError",
    "Verdict",
    "judge_all",
    "judge_skip_reason",
    "judge_unavailable",
    "load_prompt",
]


def __getattr__(name: str) -> Any:
    if name in _ADAPTER_NAMES:
        return getattr(import_module("assay.judge.openai_adapter"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
