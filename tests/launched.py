"""Suite runs and gates started as the CLI and the service start them: through the one launcher
(flows/launch.py), from the same options (`RunOptions`, `GateOptions`). A negative verdict
comes back as the result it is (its flow run ends Failed, see tests/test_verdict_states.py)."""

from __future__ import annotations

from typing import Any

from assay.gate.decision import GateRun
from assay.runs.options import GateOptions, RunOptions
from assay.runs.records import EvalResult
from flows.launch import launch, start


def suite_run(**options: Any) -> EvalResult:
    """Run the suite-run flow in this process with these `RunOptions`."""
    return launch(RunOptions(**options), "suite_run")


def gate(**options: Any) -> GateRun:
    """Run the gate flow in this process with these `GateOptions`."""
    return launch(GateOptions(**options), "gate")


def flow(name: str, **parameters: Any) -> Any:
    """Run `flows.<name>` in this process through the launcher; its result, whatever the
    verdict."""
    return start(name, ("assay",), **parameters)
