"""A flow's verdict in a few words: the record each feature's `render` module fills in.

A verdict is a result, not a crash: the flows end with the state *named* for the verdict (so a
regressed run, a failed gate and a passing run look different in the runs list), Completed when it
is positive and Failed when it is not (`tasks.verdicts`), and the reason, with its numbers, as the
state message. Each feature words its own flow's verdict next to its
other renderings (`assay.runs.render.suite_run_verdict`, `assay.gate.render.gate_verdict`, …),
built from evidence only, never from output text.
"""

from __future__ import annotations

from pydantic import BaseModel


class FlowVerdict(BaseModel):
    name: str
    """The final state's name, e.g. `Regressed`."""
    message: str
    """Why, with the figures."""
    passed: bool
    """Whether the verdict is positive: the state is then Completed, else Failed."""
