"""Judge configuration for tasks: JudgeSettings block or environment, budgets from blocks."""

from __future__ import annotations

import os
from functools import partial
from typing import cast

from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError

from assay.finops.budget import BUDGET_BLOCK_FIELDS, Budget
from assay.finops.pricing import Prices
from assay.judge import OpenAIJudge, judge_skip_reason, load_prompt
from assay.judge.service import FREE, JudgeSetup
from blocks import FinOpsBudget, JudgeSettings

INPUT_PRICE_ENV = "ASSAY_JUDGE_INPUT_PRICE"
OUTPUT_PRICE_ENV = "ASSAY_JUDGE_OUTPUT_PRICE"
CONCURRENCY_ENV = "ASSAY_JUDGE_CONCURRENCY"


def read_budgets() -> list[Budget] | None:
    """Every saved FinOpsBudget; None when they cannot be read (the preflight then refuses)."""
    try:
        with get_client(sync_client=True) as client:
            documents = client.read_block_documents_by_type(
                block_type_slug=FinOpsBudget.get_block_type_slug()
            )
    except (ObjectNotFound, PrefectHTTPStatusError) as exc:
        if isinstance(exc, PrefectHTTPStatusError) and exc.response.status_code != 404:
            return None
        return []  # the block type was never registered: no budget exists
    except Exception:
        return None
    try:
        return [
            Budget(
                name=document.name or "unnamed",
                **FinOpsBudget.model_validate(document.data).model_dump(
                    include=BUDGET_BLOCK_FIELDS
                ),
            )
            for document in documents
        ]
    except ValueError:
        return None  # a malformed budget is an unreadable budget: fail closed


def judge_setup(judge_block: str | None, fresh: bool) -> JudgeSetup:
    """How this run judges: the named JudgeSettings block, else `ASSAY_JUDGE_MODEL` +
    `OPENAI_API_KEY` (+ `OPENAI_BASE_URL`), else no judge (checks skipped with the reason)."""
    budgets = read_budgets()
    if judge_block:
        settings = cast(JudgeSettings, JudgeSettings.load(judge_block))
        key = settings.api_key.get_secret_value() if settings.api_key else None
        if not key:
            return JudgeSetup(None, "no credentials", budgets=budgets, fresh=fresh)
        prompt = load_prompt(settings.prompt_version)
        return JudgeSetup(
            make_judge=partial(
                OpenAIJudge, settings.model, base_url=settings.base_url, api_key=key, prompt=prompt
            ),
            skip_reason="",
            model=settings.model,
            prompt_version=prompt.version,
            max_concurrency=settings.max_concurrency,
            prices=Prices(
                input_per_million=settings.input_price_per_million,
                output_per_million=settings.output_price_per_million,
            ),
            budgets=budgets,
            fresh=fresh,
        )
    reason = judge_skip_reason()
    if reason is not None:
        return JudgeSetup(None, reason, budgets=budgets, fresh=fresh)
    model = os.environ["ASSAY_JUDGE_MODEL"].strip()
    prompt = load_prompt()
    return JudgeSetup(
        make_judge=partial(OpenAIJudge, model, prompt=prompt),
        skip_reason="",
        model=model,
        prompt_version=prompt.version,
        max_concurrency=int(os.environ.get(CONCURRENCY_ENV, "4")),
        prices=Prices(
            input_per_million=float(os.environ.get(INPUT_PRICE_ENV, "0")),
            output_per_million=float(os.environ.get(OUTPUT_PRICE_ENV, "0")),
        )
        if INPUT_PRICE_ENV in os.environ or OUTPUT_PRICE_ENV in os.environ
        else FREE,
        budgets=budgets,
        fresh=fresh,
    )
