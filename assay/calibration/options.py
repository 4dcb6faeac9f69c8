"""What the calibration flow takes: the set, where the evidence goes, which judge."""

from __future__ import annotations

from pydantic import Field

from assay.choices import JudgeChoice, StoreChoice


class CalibrationOptions(StoreChoice, JudgeChoice):
    """Measure a judge against a calibration set's human labels.

    The set travels by reference (a path): Prefect records every flow parameter.
    """

    calibration_set: str = Field(
        min_length=1, description="Path of the calibration set (JSONL written by `assay label`)."
    )
