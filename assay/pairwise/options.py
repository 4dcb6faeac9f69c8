"""What the compare flow takes: the suite, the two sides, where the evidence goes, which judge."""

from __future__ import annotations

from pydantic import Field

from assay.choices import JudgeChoice, StoreChoice


class CompareOptions(StoreChoice, JudgeChoice):
    """Compare two subjects' outputs on one suite with a pairwise judge, order swapped (no
    judge configured: every pair is unjudged).

    Both output sets travel by reference (paths or URIs): Prefect records every flow parameter.
    """

    suite: str = Field(
        min_length=1,
        description="Published suite reference, `name@version` (or `name` for the latest), or "
        "a suite file, which is published first.",
    )
    outputs_a: str = Field(
        min_length=1, description="Path or URI of a JSONL file or folder with side A's outputs."
    )
    outputs_b: str = Field(min_length=1, description="Path or URI of side B's outputs.")
    label_a: str = Field(default="A", description="Name of side A in the report (e.g. `v1`).")
    label_b: str = Field(default="B", description="Name of side B in the report.")
