"""What every flow takes: where the evidence goes, which judge, where findings are sent.

Each choice is a small model whose fields a flow's options inherit (`RunOptions` takes all
three), so a flow's parameters stay flat (`{"store": …, "judge_block": …}`) while each field —
its name, default, bounds and description — is declared once, here (the descriptions' text in
`assay.help_texts`, which the command line's start-up reads without the models).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from assay import help_texts


class StoreChoice(BaseModel):
    """Where the evidence is kept: a store URI, or a saved EvidenceStorage block."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str | None = Field(default=None, description=help_texts.STORE)
    storage_block: str | None = Field(default=None, description=help_texts.STORAGE_BLOCK)


class JudgeChoice(BaseModel):
    """Which judge decides the judged checks, and whether its cached verdicts count."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    judge_block: str | None = Field(default=None, description=help_texts.JUDGE_BLOCK)
    fresh_judge: bool = Field(default=False, description=help_texts.FRESH_JUDGE)


class NotificationChoice(BaseModel):
    """Where a flow's findings are sent (nowhere by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    notification_block: str | None = Field(default=None, description=help_texts.NOTIFICATION_BLOCK)
