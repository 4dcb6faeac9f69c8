"""Judge options shared by `assay run` and `assay gate`, checked before any Prefect API starts."""

from __future__ import annotations

from assay.cli import _common as common


def check_judge_options(calibration: str | None) -> None:
    """Exit 2 with one line for an unreadable calibration set, bad `ASSAY_JUDGE_REDACT` or an
    API key that could never be sent (the bounds of the judge options are `RunOptions`')."""
    from assay.calibration.labels import load_set
    from assay.judge.endpoint import check_judge_environment
    from assay.judge.redaction import RedactionSettings

    common.guarded(RedactionSettings.configured)
    common.guarded(check_judge_environment)
    if calibration is not None:
        common.guarded(lambda: load_set(calibration))
