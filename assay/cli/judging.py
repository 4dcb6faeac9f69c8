"""Judge options shared by `assay run` and `assay gate`, checked before any Prefect API starts."""

from __future__ import annotations

from assay.cli import _common as common

MAX_REPEATS = 15
"""The most verdicts asked per check (as the JudgeSettings block allows)."""


def check_judge_options(
    calibration: str | None,
    judge_repeats: int | None = None,
    max_judge_flip_rate: float | None = None,
) -> None:
    """Exit 2 with one line for an unreadable calibration set, bad `ASSAY_JUDGE_REDACT`, an API
    key that could never be sent, or a repeat count or flip-rate limit out of range."""
    from assay.calibration.labels import load_set
    from assay.judge.endpoint import check_judge_environment
    from assay.judge.redaction import RedactionSettings

    if judge_repeats is not None and not 1 <= judge_repeats <= MAX_REPEATS:
        common.fail(f"--judge-repeats must be between 1 and {MAX_REPEATS}, not {judge_repeats}")
    if max_judge_flip_rate is not None and not 0.0 <= max_judge_flip_rate <= 1.0:
        common.fail(f"--max-judge-flip-rate must be between 0 and 1, not {max_judge_flip_rate}")
    common.guarded(RedactionSettings.configured)
    common.guarded(check_judge_environment)
    if calibration is not None:
        common.guarded(lambda: load_set(calibration))
