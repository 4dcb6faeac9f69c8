"""A run plan for tests that start a run record by hand (`assay.runs.records.start_run`): a
fresh run id and a one-case, one-chunk run of suite `s@1` for `agent:bot`, unless told otherwise."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from assay.runs.records import RunPlan


def a_plan(**fields: Any) -> RunPlan:
    """A `RunPlan` with `fields` over the defaults above."""
    defaults: dict[str, Any] = {
        "run_id": str(uuid4()),
        "suite": "s",
        "suite_version": 1,
        "subject_kind": "agent",
        "subject_id": "bot",
        "variant": None,
        "pass_threshold": 0.8,
        "outputs": "x.jsonl",
        "cases": 1,
        "chunks": 1,
    }
    return RunPlan(**{**defaults, **fields})
