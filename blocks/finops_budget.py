"""The FinOpsBudget block: how much judge spending is allowed, and what happens past it."""

from __future__ import annotations

from typing import Literal

from prefect.blocks.core import Block
from prefect.client.orchestration import get_client
from prefect.exceptions import ObjectNotFound, PrefectHTTPStatusError
from pydantic import Field

from assay.finops.budget import BUDGET_BLOCK_FIELDS, Budget


class FinOpsBudget(Block):
    """A spending limit checked before every judge task (SPEC §8).

    `block` stops spending that would exceed the limit, `throttle` stops it too but is meant to be
    paired with a lower concurrency, and `alert` allows it and reports a finding.

    Example:
        ```python
        from blocks import FinOpsBudget

        FinOpsBudget(limit_usd=50, period="month", mode="block", scope="suite:refunds").save(
            "refunds-monthly", overwrite=True
        )
        ```
    """

    _block_type_name = "Assay FinOps Budget"
    _block_type_slug = "assay-finops-budget"
    _description = "Judge spending limit per period, with block / throttle / alert behaviour."

    limit_usd: float = Field(gt=0, description="Spending limit in USD for one period.")
    period: Literal["day", "week", "month"] = Field(
        default="month", description="Calendar period the limit applies to (UTC)."
    )
    mode: Literal["block", "throttle", "alert"] = Field(
        default="block", description="What to do when projected spend would exceed the limit."
    )
    scope: str = Field(
        default="*",
        description="What the budget covers: `*`, `suite:NAME` or `subject:KIND:ID`.",
    )

    def budget(self, name: str) -> Budget:
        """This block as the domain's `Budget`, named after the saved block."""
        return Budget(name=name, **self.model_dump(include=BUDGET_BLOCK_FIELDS))


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
            FinOpsBudget.model_validate(document.data).budget(document.name or "unnamed")
            for document in documents
        ]
    except ValueError:
        return None  # a malformed budget is an unreadable budget: fail closed
