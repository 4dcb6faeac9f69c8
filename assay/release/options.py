"""What the release flow takes: the trials, the contract, where the evidence goes."""

from __future__ import annotations

from pydantic import Field

from assay.choices import StoreChoice


class ReleaseOptions(StoreChoice):
    """Gate each variant of a trials file on its five release signals (SPEC §12)."""

    trials: str = Field(
        min_length=1,
        description="Path or `s3://` URI of a JSONL file, one trial evidence record per line.",
    )
    contract: str | None = Field(
        default=None, description="Path of a release contract (YAML); None uses the defaults."
    )
