"""Judge prices and spend estimates (SPEC §8): what a call cost, and what a task will cost.

Estimates run before a task, from characters; the ledger prices the real usage afterwards.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import BaseModel, ConfigDict, Field

CHARS_PER_TOKEN = 4
"""Rough characters per token for English text with common BPE tokenizers (OpenAI's rule of
thumb). Used only to *estimate* spend before a task; the ledger prices the real usage."""

NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]

BATCH_DISCOUNT: Final = 0.5
"""The share taken off both token prices for a call sent through the provider's batch API.
OpenAI's Batch API: "a 50% discount compared to synchronous APIs"
(https://platform.openai.com/docs/guides/batch); Anthropic's Message Batches: "50% of standard
API prices" (https://docs.anthropic.com/en/docs/build-with-claude/batch-processing)."""


class Prices(BaseModel):
    """What the judge model costs, in USD per million tokens (from the `JudgeSettings` block)."""

    model_config = ConfigDict(frozen=True)

    input_per_million: NonNegativeFloat
    output_per_million: NonNegativeFloat
    batch_discount: float = Field(default=BATCH_DISCOUNT, ge=0, lt=1, allow_inf_nan=False)
    """The share off both prices for a call through the batch API (`BATCH_DISCOUNT`)."""

    def batch(self) -> Prices:
        """The prices of a call sent through the batch API: both less `batch_discount`."""
        kept = 1 - self.batch_discount
        return self.model_copy(
            update={
                "input_per_million": self.input_per_million * kept,
                "output_per_million": self.output_per_million * kept,
                "batch_discount": 0.0,
            }
        )


def price(prices: Prices, input_tokens: int, output_tokens: int) -> float:
    """What a judge call (or a sum of calls) cost, in USD.

    Args:
        prices: USD per million input and output tokens.
        input_tokens: Prompt tokens, as reported by the endpoint's usage figures.
        output_tokens: Completion tokens, as reported by the endpoint's usage figures.

    Returns:
        The cost in USD.

    Raises:
        ValueError: a token count is negative.
    """
    if input_tokens < 0 or output_tokens < 0:
        raise ValueError("token counts cannot be negative")
    return (
        input_tokens * prices.input_per_million + output_tokens * prices.output_per_million
    ) / 1_000_000


def estimate(requests: int, avg_input_tokens: int, avg_output_tokens: int, prices: Prices) -> float:
    """Projected spend of a judge task, in USD, for the preflight.

    Cache hits cost nothing, so the caller excludes them and passes only the requests that will
    really be sent (pairwise mode sends two per case: one per order).

    Args:
        requests: Judge calls the task will make.
        avg_input_tokens: Mean prompt tokens per call (see `estimate_tokens`).
        avg_output_tokens: Mean completion tokens per call.
        prices: USD per million input and output tokens.

    Returns:
        The projected cost in USD.

    Raises:
        ValueError: a count is negative.
    """
    if requests < 0:
        raise ValueError("requests cannot be negative")
    return price(prices, requests * avg_input_tokens, requests * avg_output_tokens)


def estimate_tokens(
    text_lengths: list[int], prompt_overhead_tokens: int = 250, output_tokens: int = 150
) -> tuple[int, int]:
    """Estimate the tokens of a batch of judge calls without a tokenizer.

    Heuristic: a call's input is its variable text at `CHARS_PER_TOKEN` (4) characters per
    token, rounded up, plus a fixed overhead for the prompt template, rubric and JSON schema;
    its output is a fixed allowance for the reasoning and the verdict. Four characters per token
    is the usual figure for English with BPE tokenizers; other languages and code run denser,
    which is one reason the preflight is a guard rail and the ledger prices the real usage.
    Rounding up errs on the side of a higher projection. Pass the totals to `price`, or their
    per-call means to `estimate`.

    Args:
        text_lengths: Characters of variable text (case input, output, reference…) per call.
        prompt_overhead_tokens: Tokens added to every call by the prompt template.
        output_tokens: Tokens expected back per call.

    Returns:
        `(input_tokens_total, output_tokens_total)` for all the calls.

    Raises:
        ValueError: a length or allowance is negative.
    """
    if prompt_overhead_tokens < 0 or output_tokens < 0 or any(n < 0 for n in text_lengths):
        raise ValueError("lengths and token allowances cannot be negative")
    text_tokens = sum(-(-n // CHARS_PER_TOKEN) for n in text_lengths)
    calls = len(text_lengths)
    return text_tokens + calls * prompt_overhead_tokens, calls * output_tokens
