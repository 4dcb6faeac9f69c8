"""The JudgeSettings block: which judge model Assay calls, and what it costs — the one judge
configuration every path judges with.

A JudgeSettings is a saved block, or one built unsaved from the environment
(`JudgeSettings.from_env`: `ASSAY_JUDGE_MODEL` + `OPENAI_API_KEY`, `OPENAI_BASE_URL`,
`ASSAY_JUDGE_CONCURRENCY` and its `_CEILING`, the price variables, `ASSAY_JUDGE_REDACT`), or, in a
suite run's chunk, one rebuilt from the settings the run resolved where it was launched
(`JudgeSettings.from_config`, with this process's `OPENAI_API_KEY`). `judge_setup` hands a task
its judge (and `JudgeSettings.embedder` the outcome score its embedder) from one of them, with
every saved FinOpsBudget; with none, the checks are skipped with the reason.

Every bound is its field's (`assay.judge.config.JudgeFields`; `judge_repeats`: the run options'
`MAX_JUDGE_REPEATS`), so a value out of bounds in a block or a variable is refused before any
flow starts (`flows/launch.py`), never inside a chunk.

What this process keeps: one structured-output mode memory per (endpoint, model), so a chunk
does not re-probe an endpoint an earlier chunk probed; the last `_SETUPS_KEPT` judge setups, per
checksum of the settings (a block's document id and data, the key included, so an edited or
re-keyed block is read anew) and repeats; and a block's document read from the API once per flow
run (every chunk of a run judges with the judge the run started with). Budgets are read anew for
every setup, at its first preflight that has something left to ask (`budgets_once`): a lowered
budget applies from the next chunk on, and a chunk the verdict cache answers whole reads none.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache, partial
from threading import Lock
from typing import TYPE_CHECKING, NamedTuple, cast

from prefect.blocks.core import Block
from pydantic import Field, SecretStr

from assay.finops.budget import Budget
from assay.finops.pricing import Prices
from assay.judge.batch import Batching
from assay.judge.config import JudgeConfig, JudgeFields, JurorFields
from assay.judge.endpoint import (
    API_KEY_ENV,
    DEFAULT_BASE_URL,
    check_judge_environment,
    judge_skip_reason,
)
from assay.judge.port import NO_CREDENTIALS
from assay.judge.prompts import load_prompt
from assay.judge.service import JudgeSetup
from assay.judge.spending import BudgetsRead, budgets_once
from assay.process_state import remembered
from assay.runs.options import option_bounds
from blocks.finops_budget import read_budgets

if TYPE_CHECKING:
    from assay.judge.concurrency import BillingMemory
    from assay.judge.embeddings import OpenAIEmbedder
    from assay.judge.modes import ModeMemory


class _EndpointMemory(NamedTuple):
    modes: ModeMemory
    billing: BillingMemory


_MEMORIES: dict[tuple[str | None, str], _EndpointMemory] = {}
_MEMORIES_LOCK = Lock()
remembered(__name__, "_MEMORIES", _MEMORIES.clear, _MEMORIES_LOCK)


def _endpoint_memory(base_url: str | None, model: str) -> _EndpointMemory:
    """What this process learned about one (endpoint, model): the structured-output mode it
    answers in, and whether its latest reply was billed within its bound.

    The adapter keeps what it learned per instance; judges built from the same configuration
    share one memory, so a chunk does not re-probe an endpoint the previous chunk already probed,
    and a run does not send its first call alone to a judge the previous run found billing
    within its bound (`assay.judge.concurrency`).
    """
    from assay.judge.concurrency import BillingMemory
    from assay.judge.modes import ModeMemory

    with _MEMORIES_LOCK:
        found = _MEMORIES.get((base_url, model))
        if found is None:
            found = _MEMORIES[(base_url, model)] = _EndpointMemory(ModeMemory(), BillingMemory())
        return found


class JudgeSettings(Block, JudgeFields):
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

    api_key: SecretStr | None = Field(default=None, description="API key for the judge endpoint.")
    judge_repeats: int = Field(
        default=1,
        **option_bounds("judge_repeats"),
        description="Verdicts asked per llm_judge check; the majority decides, an even split is "
        "skipped (`judge split`), and the flip rate is reported.",
    )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> JudgeSettings | None:
        """The unsaved, validated block the environment configures, or None when it configures
        no judge (`judge_skip_reason` says why: no `ASSAY_JUDGE_MODEL`, or no key).

        Raises:
            InputError: A variable out of its field's bounds (`ASSAY_JUDGE_CONCURRENCY=0`), a bad
                `ASSAY_JUDGE_REDACT`, or a key that could never be sent — naming the variable.
        """
        env = os.environ if environ is None else environ
        config = JudgeConfig.from_environ(env)
        check_judge_environment(env)
        if config is None or judge_skip_reason(env) is not None:
            return None
        return cls(**config.model_dump(), api_key=SecretStr(env[API_KEY_ENV].strip()))

    @classmethod
    def from_config(cls, config: JudgeConfig) -> JudgeSettings:
        """A run's settings, resolved where it was launched, with this process's
        `OPENAI_API_KEY` (none: every check skipped, `no credentials`)."""
        key = os.environ.get(API_KEY_ENV, "").strip()
        return cls(**config.model_dump(), api_key=SecretStr(key) if key else None)

    @property
    def source(self) -> str:
        """How errors name these settings: the saved block's name, else the environment."""
        name = self._block_document_name
        return f"JudgeSettings {name}" if name else "JudgeSettings"

    def judge_setup(
        self, budgets: list[Budget] | BudgetsRead | None, fresh: bool, repeats: int | None = None
    ) -> JudgeSetup:
        """How a task judges with these settings (no key: every check skipped, `no
        credentials`); with a jury, every juror's setup convened (`assay.judge.jury`)."""
        if self.jury is not None:
            from assay.judge.jury import convene

            alone = self.model_copy(update={"jury": None})
            jurors = [alone, *(alone._juror(juror) for juror in self.jury.jurors)]
            setups = [juror.judge_setup(budgets, fresh, repeats) for juror in jurors]
            return convene(setups, self.jury.aggregation)
        key = self.api_key.get_secret_value() if self.api_key else None
        if not key:
            return JudgeSetup(None, NO_CREDENTIALS, budgets=budgets, fresh=fresh)
        from assay.judge.openai_adapter import OpenAIJudge  # the SDK, only for a judge that runs

        prompt = load_prompt(self.prompt_version)
        redaction = self.redaction(self.source)
        memory = _endpoint_memory(self.base_url, self.model)
        return JudgeSetup(
            make_judge=partial(
                OpenAIJudge,
                self.model,
                base_url=self.base_url or DEFAULT_BASE_URL,  # never this process's variable
                api_key=key,
                prompt=prompt,
                modes=memory.modes,
                redaction=redaction,
                billing=memory.billing,
            ),
            skip_reason="",
            model=self.model,
            prompt_version=redaction.prompt_version(prompt.version),
            redaction=redaction,
            repeats=repeats or self.judge_repeats,
            max_concurrency=self.max_concurrency,
            concurrency_ceiling=self.concurrency_ceiling,
            prices=Prices(
                input_per_million=self.input_price_per_million,
                output_per_million=self.output_price_per_million,
            ),
            budgets=budgets,
            fresh=fresh,
            batching=Batching(
                self.base_url or DEFAULT_BASE_URL, key, poll_seconds=self.batch_poll_seconds
            )
            if self.mode == "batch"
            else None,
            billing=memory.billing,
        )

    def _juror(self, juror: JurorFields) -> JudgeSettings:
        """These settings as one more juror: its model, and its endpoint, key (read here from
        the variable it names) and prices where it names them."""
        update: dict[str, object] = juror.model_dump(exclude={"api_key_env"}, exclude_none=True)
        if juror.api_key_env is not None:
            key = os.environ.get(juror.api_key_env, "").strip()
            update["api_key"] = SecretStr(key) if key else None
        return self.model_copy(update=update)

    def embedder(self) -> tuple[OpenAIEmbedder | None, str]:
        """The embedder `ASSAY_EMBEDDING_MODEL` names, with this judge's key (else
        `OPENAI_API_KEY`), base URL and redaction; or None and why not."""
        from assay.judge.embeddings import (  # the SDK, only for the outcome score
            EMBEDDING_MODEL_ENV,
            OpenAIEmbedder,
            embedder_skip_reason,
        )

        key = self.api_key.get_secret_value() if self.api_key else None
        reason = embedder_skip_reason(api_key=key)
        if reason is not None:
            return None, reason

        model = os.environ[EMBEDDING_MODEL_ENV].strip()
        redaction = self.redaction(self.source)
        base_url = self.base_url or DEFAULT_BASE_URL
        return OpenAIEmbedder(model, base_url, key, redaction=redaction), ""


def judge_settings(judge_block: str | None) -> JudgeSettings | None:
    """The named JudgeSettings block (read once per flow run), else `JudgeSettings.from_env`."""
    if judge_block:
        return _read_block(judge_block, _flow_run_id())[0]
    return JudgeSettings.from_env()


def judge_setup(
    judge_block: str | None,
    fresh: bool,
    repeats: int | None = None,
    *,
    config: JudgeConfig | None = None,
) -> JudgeSetup:
    """How this task judges: the named JudgeSettings block, else `config` (the settings a suite
    run resolved where it was launched, `ChunkJob.judge`), else the environment's
    (`JudgeSettings.from_env`), else no judge (checks skipped with the reason).

    `repeats` (`--judge-repeats`) overrides the settings' `judge_repeats` (default 1). The setup
    is cached per checksum of the settings (see the module docstring); the budgets are not:
    they are read when its first preflight needs them.
    """
    budgets = budgets_once(read_budgets)
    if judge_block:
        settings, checksum = _read_block(judge_block, _flow_run_id())
    else:
        found = JudgeSettings.from_config(config) if config else JudgeSettings.from_env()
        if found is None:
            return JudgeSetup(
                None, judge_skip_reason() or NO_CREDENTIALS, budgets=budgets, fresh=fresh
            )
        settings, checksum = found, _checksum(found)
    return replace(_setup(settings, checksum, repeats), budgets=budgets, fresh=fresh)


def _flow_run_id() -> str | None:
    from prefect.runtime import flow_run

    return cast(str | None, flow_run.id)


_SETUPS: dict[tuple[str, int | None], JudgeSetup] = {}
_SETUPS_LOCK = Lock()
remembered(__name__, "_SETUPS", _SETUPS.clear, _SETUPS_LOCK)
_SETUPS_KEPT = 16
_READING = Lock()


def _setup(settings: JudgeSettings, checksum: str, repeats: int | None) -> JudgeSetup:
    key = (checksum, repeats)
    with _SETUPS_LOCK:
        found = _SETUPS.get(key)
    if found is not None:
        return found
    setup = settings.judge_setup(None, False, repeats)
    with _SETUPS_LOCK:
        if len(_SETUPS) >= _SETUPS_KEPT:
            _SETUPS.pop(next(iter(_SETUPS)))
        return _SETUPS.setdefault(key, setup)


def _read_block(name: str, flow_run: str | None) -> tuple[JudgeSettings, str]:
    if flow_run is None:
        return _block_document(name)
    with _READING:  # chunks start together: the first reads, the others wait for it
        return _block_document_once(name, flow_run)


@lru_cache(maxsize=64)
def _block_document_once(name: str, flow_run: str) -> tuple[JudgeSettings, str]:
    return _block_document(name)


remembered(__name__, "_block_document_once", _block_document_once.cache_clear)


def _block_document(name: str) -> tuple[JudgeSettings, str]:
    """The block and its checksum; one API read."""
    settings = cast(JudgeSettings, JudgeSettings.load(name))
    return settings, _checksum(settings)


def _checksum(settings: JudgeSettings) -> str:
    """A checksum of the settings: the block document's id (when saved) and data, secrets
    included (a rotated key is an edit)."""
    data = settings.model_dump(mode="json", exclude={"api_key"})
    key = settings.api_key.get_secret_value() if settings.api_key else None
    material = json.dumps(
        [str(settings._block_document_id), data, key], sort_keys=True, default=str
    )
    return hashlib.sha256(material.encode()).hexdigest()
