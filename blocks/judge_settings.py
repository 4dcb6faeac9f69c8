"""The JudgeSettings block: which judge model Assay calls, and what it costs."""

from __future__ import annotations

from prefect.blocks.core import Block
from pydantic import Field, SecretStr


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
