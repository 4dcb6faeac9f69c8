"""The JudgeSettings block: which judge model Assay calls, and what it costs.

`judge_setup` is how every task judges: the named JudgeSettings block, else the environment
(`ASSAY_JUDGE_MODEL` + `OPENAI_API_KEY`, `OPENAI_BASE_URL`, the price and concurrency variables
below), else no judge (checks skipped with the reason) — with every saved FinOpsBudget.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import replace
from functools import lru_cache, partial
from threading import Lock
from typing import TYPE_CHECKING, cast

from prefect.blocks.core import Block
from pydantic import Field, SecretStr, model_validator

from assay.finops.budget import Budget
from assay.finops.pricing import Prices
from assay.judge.endpoint import API_KEY_ENV, BASE_URL_ENV, MODEL_ENV, judge_skip_reason
from assay.judge.port import NO_CREDENTIALS
from assay.judge.prompts import load_prompt
from assay.judge.redaction import REDACT_ENV, RedactionSettings
from assay.judge.service import FREE, JudgeSetup
from blocks.finops_budget import read_budgets

if TYPE_CHECKING:
    from assay.judge.modes import ModeMemory

INPUT_PRICE_ENV = "ASSAY_JUDGE_INPUT_PRICE"
OUTPUT_PRICE_ENV = "ASSAY_JUDGE_OUTPUT_PRICE"
CONCURRENCY_ENV = "ASSAY_JUDGE_CONCURRENCY"

_MEMORIES: dict[tuple[str | None, str], ModeMemory] = {}
_MEMORIES_LOCK = Lock()


def _mode_memory(base_url: str | None, model: str) -> ModeMemory:
    """One structured-output mode memory per (endpoint, model) for this process.

    The adapter keeps what it learned per instance; judges built from the same configuration
    share one memory, so a chunk does not re-probe an endpoint the previous chunk already probed.
    """
    from assay.judge.modes import ModeMemory

    with _MEMORIES_LOCK:
        return _MEMORIES.setdefault((base_url, model), ModeMemory())


class JudgeSettings(Block):
    """An OpenAI-compatible judge endpoint, pinned to one model and one prompt version.

    Changing the model pin or the prompt version makes the judge uncalibrated (SPEC §9), so they
    live here, next to the credentials, not in code.

    Example:
        ```python
        from pydantic import SecretStr
        from blocks import JudgeSettings

        JudgeSettings(
            model="gpt-4o-mini-2024-07-18",
            api_key=SecretStr("sk-…"),
            input_price_per_million=0.15,
            output_price_per_million=0.60,
        ).save("default-judge", overwrite=True)
        ```
    """

    _block_type_name = "Assay Judge Settings"
    _block_type_slug = "assay-judge-settings"
    _description = "OpenAI-compatible judge: model pin, endpoint, key, concurrency and prices."

    model: str = Field(description="Pinned judge model, e.g. `gpt-4o-mini-2024-07-18`.")
    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible base URL (vLLM, Ollama, llama.cpp); empty for OpenAI.",
    )
    api_key: SecretStr | None = Field(default=None, description="API key for the judge endpoint.")
    prompt_version: str = Field(
        default="default", description="Name of the versioned judge prompt template to use."
    )
    max_concurrency: int = Field(
        default=4, ge=1, le=256, description="Judge calls in flight at once."
    )
    input_price_per_million: float = Field(
        default=0.0, ge=0, description="USD per 1M input tokens, for the cost ledger and budgets."
    )
    output_price_per_million: float = Field(
        default=0.0, ge=0, description="USD per 1M output tokens, for the cost ledger and budgets."
    )
    judge_repeats: int = Field(
        default=1,
        ge=1,
        le=15,
        description="Verdicts asked per llm_judge check; the majority decides, an even split is "
        "skipped (`judge split`), and the flip rate is reported.",
    )
    redact: list[str] | None = Field(
        default=None,
        description="Kinds replaced by placeholders before any judge call: email, phone, "
        "credit_card, secret (empty list: none); unset: ASSAY_JUDGE_REDACT, else all four. "
        "Part of the recorded prompt version.",
    )
    redact_patterns: list[str] = Field(
        default_factory=list,
        description="Extra RE2 patterns redacted as `[REDACTED:custom]` (part of the prompt "
        "version).",
    )

    @model_validator(mode="after")
    def _redaction_is_valid(self) -> JudgeSettings:
        RedactionSettings.parse(self.redact, self.redact_patterns)  # names the bad kind/pattern
        return self

    def redaction(self, name: str | None = None) -> RedactionSettings:
        """What this block's judge (and embedder) redacts: `redact` / `redact_patterns`, with
        the environment's kinds where `redact` is unset."""
        source = f"JudgeSettings {name}" if name else "JudgeSettings"
        return RedactionSettings.configured(self.redact, self.redact_patterns, source=source)

    def judge_setup(
        self, budgets: list[Budget] | None, fresh: bool, repeats: int | None = None
    ) -> JudgeSetup:
        """How a task judges with this block (no key: every check skipped, `no credentials`)."""
        key = self.api_key.get_secret_value() if self.api_key else None
        if not key:
            return JudgeSetup(None, NO_CREDENTIALS, budgets=budgets, fresh=fresh)
        from assay.judge.openai_adapter import OpenAIJudge  # the SDK, only for a judge that runs

        prompt = load_prompt(self.prompt_version)
        redaction = self.redaction(self._block_document_name)
        return JudgeSetup(
            make_judge=partial(
                OpenAIJudge,
                self.model,
                base_url=self.base_url,
                api_key=key,
                prompt=prompt,
                modes=_mode_memory(self.base_url, self.model),
                redaction=redaction,
            ),
            skip_reason="",
            model=self.model,
            prompt_version=redaction.prompt_version(prompt.version),
            redaction=redaction,
            repeats=repeats or self.judge_repeats,
            max_concurrency=self.max_concurrency,
            prices=Prices(
                input_per_million=self.input_price_per_million,
                output_per_million=self.output_price_per_million,
            ),
            budgets=budgets,
            fresh=fresh,
        )


def judge_setup(judge_block: str | None, fresh: bool, repeats: int | None = None) -> JudgeSetup:
    """How this run judges: the named JudgeSettings block, else `ASSAY_JUDGE_MODEL` +
    `OPENAI_API_KEY` (+ `OPENAI_BASE_URL`), else no judge (checks skipped with the reason).

    `repeats` (`--judge-repeats`) overrides the block's `judge_repeats` (default 1); redaction
    comes from the block, else `ASSAY_JUDGE_REDACT` (default: every kind).

    The setup is cached in this process: a block's per block document (its id and a checksum of
    its data, so an edited block is read anew), read from the API once per flow run (every
    chunk of a run judges with the judge the run started with); the environment's per value of
    the variables it reads. Budgets are read on every call: a lowered budget applies from the
    next chunk on.
    """
    budgets = read_budgets()
    if judge_block:
        base = _block_setup(judge_block, repeats, _flow_run_id())
    else:
        base = _environment_setup(tuple(os.environ.get(name) for name in _JUDGE_ENV), repeats)
    return replace(base, budgets=budgets, fresh=fresh)


def _flow_run_id() -> str | None:
    from prefect.runtime import flow_run

    return cast(str | None, flow_run.id)


_JUDGE_ENV = (
    MODEL_ENV,
    API_KEY_ENV,
    BASE_URL_ENV,
    CONCURRENCY_ENV,
    INPUT_PRICE_ENV,
    OUTPUT_PRICE_ENV,
    REDACT_ENV,
)
"""Every variable an environment-configured judge is built from: its cache key."""
_BLOCK_SETUPS: dict[tuple[str, str, int | None], JudgeSetup] = {}
_BLOCK_SETUPS_LOCK = Lock()
_BLOCK_SETUPS_KEPT = 16
_READING = Lock()


def _block_setup(name: str, repeats: int | None, flow_run: str | None) -> JudgeSetup:
    if flow_run is None:
        settings, checksum = _read_block(name)
    else:
        with _READING:  # chunks start together: the first reads, the others wait for it
            settings, checksum = _read_block_once(name, flow_run)
    key = (name, checksum, repeats)
    with _BLOCK_SETUPS_LOCK:
        found = _BLOCK_SETUPS.get(key)
    if found is not None:
        return found
    setup = settings.judge_setup(None, False, repeats)
    with _BLOCK_SETUPS_LOCK:
        if len(_BLOCK_SETUPS) >= _BLOCK_SETUPS_KEPT:
            _BLOCK_SETUPS.pop(next(iter(_BLOCK_SETUPS)))
        return _BLOCK_SETUPS.setdefault(key, setup)


@lru_cache(maxsize=64)
def _read_block_once(name: str, flow_run: str) -> tuple[JudgeSettings, str]:
    return _read_block(name)


def _read_block(name: str) -> tuple[JudgeSettings, str]:
    """The block and a checksum of its document (id and data, secrets included: a rotated key
    is an edit); one API read."""
    settings = cast(JudgeSettings, JudgeSettings.load(name))
    data = settings.model_dump(mode="json", exclude={"api_key"})
    key = settings.api_key.get_secret_value() if settings.api_key else None
    material = json.dumps(
        [str(settings._block_document_id), data, key], sort_keys=True, default=str
    )
    return settings, hashlib.sha256(material.encode()).hexdigest()


@lru_cache(maxsize=8)
def _environment_setup(values: tuple[str | None, ...], repeats: int | None) -> JudgeSetup:
    env = {name: value for name, value in zip(_JUDGE_ENV, values, strict=True) if value is not None}
    reason = judge_skip_reason(env)
    if reason is not None:
        return JudgeSetup(None, reason)
    from assay.judge.openai_adapter import OpenAIJudge  # the SDK, only for a judge that runs

    model = env[MODEL_ENV].strip()
    prompt = load_prompt()
    redaction = RedactionSettings.configured(environ=env)
    priced = INPUT_PRICE_ENV in env or OUTPUT_PRICE_ENV in env
    return JudgeSetup(
        make_judge=partial(
            OpenAIJudge,
            model,
            prompt=prompt,
            modes=_mode_memory(env.get(BASE_URL_ENV), model),
            redaction=redaction,
        ),
        skip_reason="",
        model=model,
        prompt_version=redaction.prompt_version(prompt.version),
        redaction=redaction,
        repeats=repeats or 1,
        max_concurrency=int(env.get(CONCURRENCY_ENV, "4")),
        prices=Prices(
            input_per_million=float(env.get(INPUT_PRICE_ENV, "0")),
            output_per_million=float(env.get(OUTPUT_PRICE_ENV, "0")),
        )
        if priced
        else FREE,
    )
