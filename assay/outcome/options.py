"""What the outcome flow takes: the records, the contract, where the evidence goes, which judge,
where governance actions are sent."""

from __future__ import annotations

from pydantic import Field

from assay.choices import JudgeChoice, NotificationChoice, StoreChoice


class OutcomeOptions(StoreChoice, JudgeChoice, NotificationChoice):
    """Score invocation records per subject on six dimensions and act on each subject's band.

    The judge's credentials also serve the embedder (`ASSAY_EMBEDDING_MODEL`); Marginal, Poor
    and Failing subjects' governance actions are sent to the notification block. The records
    travel by reference (a path or URI): Prefect records every flow parameter.
    """

    records: str = Field(
        min_length=1,
        description="Path or URI of the invocation records (a JSONL file or a folder of them).",
    )
    contract: str | None = Field(
        default=None,
        description="Path of the outcome contract (weights, latency target, rubrics, partial "
        "rule, bands); default: the defaults, without a latency target.",
    )
