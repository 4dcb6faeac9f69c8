"""Scorers: one small module per family, registered by name.

Each scorer returns an `Outcome` (status, score in [0, 1], a reason built from its configuration,
never from the output). Import this package to register every built-in family.
"""

from assay.scorers import conversation, judge, numeric, regex, structured, text, trajectory
from assay.scorers._registry import (
    LABEL_LIMIT,
    PASS,
    Observation,
    Outcome,
    Scorer,
    ScorerConfig,
    Status,
    clamp,
    scorer,
    scorer_names,
    scorer_type,
)
from assay.scorers.spec import ScorerSpec, share_fields_set

__all__ = [
    "LABEL_LIMIT",
    "PASS",
    "Observation",
    "Outcome",
    "Scorer",
    "ScorerConfig",
    "ScorerSpec",
    "Status",
    "clamp",
    "conversation",
    "judge",
    "numeric",
    "regex",
    "scorer",
    "scorer_names",
    "scorer_type",
    "share_fields_set",
    "structured",
    "text",
    "trajectory",
]
