"""Judge options shared by `assay run` and `assay gate`, checked before any Prefect API starts."""

from __future__ import annotations

from assay.cli._common import guarded


def check_judge_options(calibration: str | None) -> None:
    """Exit 2 with one line for an unreadable calibration set or bad `ASSAY_JUDGE_REDACT`."""
    from assay.calibration.labels import load_set
    from assay.judge.redaction import RedactionSettings

    guarded(RedactionSettings.configured)
    if calibration is not None:
        guarded(lambda: load_set(calibration))
