"""The release contract: the thresholds each variant's signals are gated against (SPEC §12).

The file is optional; every threshold has a default. Maxima are counts (the seed's zero-target
for false successes, unverified completions and unknown effects), floors are rates. A floor set
to null declares that the workflow has no such floor (e.g. a read-only agent without effectful
tools); a floor that is set is never met by a rate with no denominator. Values are strict: a YAML
boolean is not a count or a rate (`true` would otherwise read as 1), though a float accepts an int.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from assay.documents import line_of, parse_document, read_text
from assay.errors import InputError


class ReleaseContract(BaseModel):
    """Release thresholds; the defaults are the seed's hard gates for an effectful agent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    false_success_max: int = Field(default=0, ge=0, strict=True)
    """Claimed completions whose outcome failed, at most."""
    unverified_completions_max: int = Field(default=0, ge=0, strict=True)
    """Claimed completions whose outcome was `unavailable`, at most."""
    unknown_effects_max: int = Field(default=0, ge=0, strict=True)
    """Tool calls whose effect is `unknown`, at most."""
    progress_floor: float | None = Field(default=0.90, ge=0.0, le=1.0, strict=True)
    """Windows with evidence delta / active windows, at least."""
    tool_effect_floor: float | None = Field(default=0.95, ge=0.0, le=1.0, strict=True)
    """Verified / (verified + failed + unknown) tool effects, at least."""
    quality_min: float | None = Field(default=None, ge=0.0, le=1.0, strict=True)
    """Mean quality over graded trials, at least (None: not gated)."""
    cost_per_verified_max: float | None = Field(default=None, ge=0.0, strict=True)
    """Total cost / verified outcomes in USD, at most (None: not gated)."""
    interval_min_n: int = Field(default=30, ge=1, strict=True)
    """Below this denominator rates show raw counts only; at or above it, Wilson 95% intervals."""


def load_contract(path: str | Path | None) -> ReleaseContract:
    """Read a contract file (YAML, or JSON by extension); None or an empty file gives defaults.

    Raises:
        InputError: unreadable file, malformed YAML/JSON, unknown key or out-of-range value,
            naming the file, the line and the field.
    """
    if path is None:
        return ReleaseContract()
    source = str(path)
    text = read_text(path)
    raw = parse_document(text, source)
    if raw is None:
        return ReleaseContract()
    if not isinstance(raw, dict):
        raise InputError(source, "a release contract must be a mapping of thresholds", line=1)
    try:
        return ReleaseContract.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = tuple(first["loc"])
        field = ".".join(str(step) for step in loc) or None
        line = line_of(text, loc, source.endswith(".json"))
        raise InputError(source, first["msg"], line=line, field=field) from None
