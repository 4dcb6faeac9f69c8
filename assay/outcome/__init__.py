"""The outcome score (SPEC §11, seed 000): six dimensions per invocation, a weighted composite per
subject, score bands and their governance actions. Pure domain: no Prefect.

- `contract`: weights, latency target, rubrics, partial rule and bands (validated).
- `records`: the invocation records (JSONL), validated without echoing their text.
- `dimensions`: each dimension's scoring method.
- `composite`: dimension means with coverage, the composite, band, action and Finding.
- `report`: scoring a records file into a write-once report, and its markdown.
"""

from assay.outcome.composite import (
    Composite,
    DimensionScore,
    SubjectOutcome,
    composite,
    governance_finding,
    subject_outcome,
)
from assay.outcome.contract import (
    ACTIONS,
    ALERTING,
    DEFAULT_RUBRICS,
    DEFAULT_WEIGHTS,
    DIMENSIONS,
    Band,
    Bands,
    Contract,
    Dimension,
    load_contract,
    parse_contract,
)
from assay.outcome.records import OutcomeRecord, check_records, read_records
from assay.outcome.render import markdown_report
from assay.outcome.report import OutcomeReport, load_report, score_outcomes

__all__ = [
    "ACTIONS",
    "ALERTING",
    "DEFAULT_RUBRICS",
    "DEFAULT_WEIGHTS",
    "DIMENSIONS",
    "Band",
    "Bands",
    "Composite",
    "Contract",
    "Dimension",
    "DimensionScore",
    "OutcomeRecord",
    "OutcomeReport",
    "SubjectOutcome",
    "check_records",
    "composite",
    "governance_finding",
    "load_contract",
    "load_report",
    "markdown_report",
    "parse_contract",
    "read_records",
    "score_outcomes",
    "subject_outcome",
]
