"""A judge's configuration that is not secret, every bound of it declared once, and reading it
from the environment.

`JudgeFields` are the fields a saved JudgeSettings block (`blocks/judge_settings.py`) and the
environment share; `JudgeConfig` is them resolved in the process that launches a run, which is
what travels with the run to every process that judges it (`assay.runs.pipeline.ChunkJob`): a
Dask worker judges with the launching process's model, endpoint, concurrency, prices and
redaction, never with its own environment's. The API key is never part of it: a key must not
reach Prefect's database as a parameter, so each judging process brings its own
(`OPENAI_API_KEY`, or the block's).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Self

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    model_validator,
)
from pydantic_core import PydanticCustomError

from assay.errors import InputError
from assay.judge.endpoint import BASE_URL_ENV, MODEL_ENV
from assay.judge.redaction import RedactionSettings

CONCURRENCY_ENV: Final = "ASSAY_JUDGE_CONCURRENCY"
CEILING_ENV: Final = "ASSAY_JUDGE_CONCURRENCY_CEILING"
INPUT_PRICE_ENV: Final = "ASSAY_JUDGE_INPUT_PRICE"
OUTPUT_PRICE_ENV: Final = "ASSAY_JUDGE_OUTPUT_PRICE"
MODE_ENV: Final = "ASSAY_JUDGE_MODE"
BATCH_POLL_ENV: Final = "ASSAY_JUDGE_BATCH_POLL_SECONDS"
JURY_ENV: Final = "ASSAY_JUDGE_JURY"
Aggregation = Literal["majority", "unanimous", "mean"]
"""How a jury's verdict is taken from its jurors' (`assay.judge.jury.aggregate`)."""
JudgeMode = Literal["sync", "batch"]
"""How a judge's calls are made: each answered at once, or sent through the Batch API."""
AUTO: Final = "auto"
"""`max_concurrency` that adapts to the endpoint (`assay.judge.concurrency.AdaptiveSlots`)."""
AUTO_START_CONCURRENCY: Final = 16
"""Calls in flight per process an `auto` window starts at: the fixed default it replaced, so a
run never starts slower than before."""
DEFAULT_CONCURRENCY_CEILING: Final = 64
MAX_JUDGE_CONCURRENCY: Final = 256


def _auto_or_number(value: Any) -> Any:
    """`auto` (any case), or a whole number of calls, from a block or a variable's text."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    if text == AUTO:
        return AUTO
    if not text.isdigit():
        raise PydanticCustomError(
            "concurrency",
            f"input should be `{AUTO}` or a whole number of calls from 1 to "
            f"{MAX_JUDGE_CONCURRENCY}",
        )
    return int(text)


Concurrency = Annotated[
    Annotated[int, Field(ge=1, le=MAX_JUDGE_CONCURRENCY)] | Literal["auto"],
    BeforeValidator(_auto_or_number),
]
"""A judge's calls in flight per process: a fixed number, or `auto`."""


class JurorFields(BaseModel):
    """One more judge of a jury: its own model pin, and where it differs from the judge's, its
    endpoint, key reference and prices. Its prompt, redaction and bounds are the judge's."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(min_length=1, description="The juror's pinned model.")
    base_url: str | None = Field(
        default=None, description="The juror's OpenAI-compatible base URL; unset: the judge's."
    )
    api_key_env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        description="The environment variable holding the juror's API key (a reference, never "
        "the key); unset: the judge's key.",
    )
    input_price_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    output_price_per_million: float | None = Field(default=None, ge=0, allow_inf_nan=False)


class JurySettings(BaseModel):
    """A judge setting's jury: the judge's own model is the first juror, `jurors` the others."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    aggregation: Aggregation = Field(
        default="majority",
        description="`majority`: more than half the jurors agree; `unanimous`: a pass needs "
        "every juror's, one fail fails; `mean`: the jurors' mean score against the threshold.",
    )
    jurors: list[JurorFields] = Field(min_length=1, max_length=14)


def _jury_file(value: Any) -> Any:
    """A jury given as the path of a YAML file (`ASSAY_JUDGE_JURY=jury.yaml`) is read here."""
    if not isinstance(value, str):
        return value
    try:
        return yaml.safe_load(Path(value).read_text(encoding="utf-8"))
    except OSError as error:
        raise PydanticCustomError(
            "jury_file", "cannot read the jury file ({kind})", {"kind": type(error).__name__}
        ) from None
    except yaml.YAMLError:
        raise PydanticCustomError("jury_file", "the jury file is not YAML") from None


Jury = Annotated[JurySettings | None, BeforeValidator(_jury_file)]


class JudgeFields(BaseModel):
    """The judge settings a JudgeSettings block and the environment share, with their bounds."""

    model: str = Field(
        min_length=1, description="Pinned judge model, e.g. `gpt-4o-mini-2024-07-18`."
    )
    base_url: str | None = Field(
        default=None,
        description="OpenAI-compatible base URL (vLLM, Ollama, llama.cpp); empty for OpenAI.",
    )
    prompt_version: str = Field(
        default="default", description="Name of the versioned judge prompt template to use."
    )
    max_concurrency: Concurrency = Field(
        default=AUTO,
        description="Judge calls in flight at once in each process a run judges in (this one, "
        "or each Dask worker), shared by its chunks: `auto` starts at "
        f"{AUTO_START_CONCURRENCY}, grows while the judge answers and halves on a 429 or 5xx; "
        f"a number (1-{MAX_JUDGE_CONCURRENCY}) is fixed.",
    )
    concurrency_ceiling: int = Field(
        default=DEFAULT_CONCURRENCY_CEILING,
        ge=1,
        le=MAX_JUDGE_CONCURRENCY,
        description="The most calls in flight per process an `auto` concurrency grows to "
        "(a fixed number is not bounded by it).",
    )
    input_price_per_million: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="USD per 1M input tokens, for the cost ledger and budgets.",
    )
    output_price_per_million: float = Field(
        default=0.0,
        ge=0,
        allow_inf_nan=False,
        description="USD per 1M output tokens, for the cost ledger and budgets.",
    )
    mode: JudgeMode = Field(
        default="sync",
        description="`sync`: each judge call answered at once; `batch`: every uncached call "
        "sent through the OpenAI Batch API at half the price, answered within 24 h, durable "
        "across a resume (docs/judge.md, Batch judging).",
    )
    batch_poll_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Seconds between two looks at a batch's status in `batch` mode.",
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

    jury: Jury = Field(
        default=None,
        description="Judge with a jury: this judge's model is the first juror, `jurors` the "
        "others (each its own model pin, endpoint, key reference, prices), and `aggregation` "
        "takes the jury's verdict (docs/judge.md, Juries). As a variable: a YAML file's path.",
    )

    @model_validator(mode="after")
    def _redaction_is_valid(self) -> Self:
        RedactionSettings.parse(self.redact, self.redact_patterns)  # names the bad kind/pattern
        return self

    @model_validator(mode="after")
    def _jurors_are_distinct(self) -> Self:
        if self.jury is not None:
            pins = [self.model, *(juror.model for juror in self.jury.jurors)]
            if len(set(pins)) != len(pins):  # a juror's verdicts are cached under its pin
                raise ValueError("the jury's model pins repeat: each juror needs its own")
        return self

    def redaction(self, source: str = "JudgeSettings") -> RedactionSettings:
        """What this judge (and its embedder) redacts: `redact` / `redact_patterns`, with the
        environment's kinds where `redact` is unset."""
        return RedactionSettings.configured(self.redact, self.redact_patterns, source=source)

    def config(self, source: str = "JudgeSettings") -> JudgeConfig:
        """These settings resolved here (redaction included), to travel with a run."""
        redaction = self.redaction(source)
        fields = self.model_dump(include=set(JudgeFields.model_fields))
        return JudgeConfig.model_validate(
            fields | {"redact": list(redaction.kinds), "redact_patterns": list(redaction.patterns)}
        )


class JudgeConfig(JudgeFields):
    """A judge's settings resolved where a run is launched: every one but the API key."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    @classmethod
    def from_environ(cls, environ: Mapping[str, str] | None = None) -> JudgeConfig | None:
        """The judge `ASSAY_JUDGE_MODEL`, `OPENAI_BASE_URL`, `ASSAY_JUDGE_CONCURRENCY` (and its
        `_CEILING`), the price variables, `ASSAY_JUDGE_MODE` (and
        `ASSAY_JUDGE_BATCH_POLL_SECONDS`), `ASSAY_JUDGE_REDACT` and `ASSAY_JUDGE_JURY` (a jury
        file) configure, or None without `ASSAY_JUDGE_MODEL`.

        Every variable that is set is checked against its field's bounds, a judge or not.

        Raises:
            InputError: Naming the variable whose value is out of bounds (never the value).
        """
        env = os.environ if environ is None else environ
        values = {
            field: _checked(name, field, env[name].strip())
            for name, field in ENVIRONMENT.items()
            if env.get(name, "").strip()
        }
        redaction = RedactionSettings.configured(environ=env)
        if "model" not in values:
            return None
        try:
            return cls.model_validate(values | {"redact": list(redaction.kinds)})
        except ValidationError as exc:  # across fields: only the jury's pins can clash
            raise InputError(JURY_ENV, _message(exc)) from None


ENVIRONMENT: Final = {
    MODEL_ENV: "model",
    BASE_URL_ENV: "base_url",
    CONCURRENCY_ENV: "max_concurrency",
    CEILING_ENV: "concurrency_ceiling",
    INPUT_PRICE_ENV: "input_price_per_million",
    OUTPUT_PRICE_ENV: "output_price_per_million",
    MODE_ENV: "mode",
    BATCH_POLL_ENV: "batch_poll_seconds",
    JURY_ENV: "jury",
}
"""Each environment variable a judge is configured by, and the field it sets."""


def _checked(name: str, field: str, raw: str) -> Any:
    info = JudgeFields.model_fields[field]
    field_type: Any = Annotated[info.annotation, info]  # the field's type with its bounds
    try:
        return TypeAdapter(field_type).validate_python(raw)
    except ValidationError as exc:
        raise InputError(name, _message(exc)) from None


def _message(exc: ValidationError) -> str:
    problem = str(exc.errors(include_input=False, include_url=False)[0]["msg"])
    problem = problem.removeprefix("Value error, ")
    return problem[:1].lower() + problem[1:]
