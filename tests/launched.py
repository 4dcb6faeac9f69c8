"""Suite runs and gates started as the CLI and the service start them: through the one launcher
(flows/launch.py), from the same options (`RunOptions`, `GateOptions`). A negative verdict
comes back as the result it is (its flow run ends Failed, see tests/test_verdict_states.py)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from assay.gate.decision import GateRun
from assay.runs.options import GateOptions, RunOptions
from assay.runs.records import EvalResult
from flows.launch import launch, start


def suite_run(**options: Any) -> EvalResult:
    """Run the suite-run flow in this process with these `RunOptions`."""
    result = launch(RunOptions(**options), "suite_run")
    assert isinstance(result, EvalResult)
    return result


def gate(**options: Any) -> GateRun:
    """Run the gate flow in this process with these `GateOptions`."""
    outcome = launch(GateOptions(**options), "gate")
    assert isinstance(outcome, GateRun)
    return outcome


def flow(name: str, options: BaseModel) -> Any:
    """Run `flows.<name>` in this process through the launcher with its options; its result,
    whatever the verdict."""
    return start(name, ("assay",), options=options)
