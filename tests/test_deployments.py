"""Every deployment in deployments/prefect.yaml points at a real flow with valid parameters.

`prefect deploy` accepts parameters it cannot validate and a worker only fails when the run
starts; this catches a renamed flow parameter or a moved example file at test time.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from prefect.flows import load_flow_from_entrypoint

REPO = Path(__file__).resolve().parent.parent
SPEC = yaml.safe_load((REPO / "deployments" / "prefect.yaml").read_text())
DEPLOYMENTS = {d["name"]: d for d in SPEC["deployments"]}


def _paths(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value.startswith("examples/") else []
    if isinstance(value, dict):
        return [p for v in value.values() for p in _paths(v)]
    if isinstance(value, list):
        return [p for v in value for p in _paths(v)]
    return []


def test_the_deployments_are_the_documented_ones() -> None:
    assert set(DEPLOYMENTS) == {
        "nightly",
        "nightly-job",
        "on-demand",
        "monitor-hourly",
        "gate",
        "calibration",
        "release",
        "outcome",
    }


@pytest.mark.parametrize("name", sorted(DEPLOYMENTS))
def test_deployment_entrypoint_and_parameters_are_valid(name: str) -> None:
    deployment = DEPLOYMENTS[name]
    flow = load_flow_from_entrypoint(str(REPO / deployment["entrypoint"]))
    flow.validate_parameters(deployment.get("parameters", {}))
    for path in _paths(deployment.get("parameters", {})):
        assert (REPO / path).is_file(), f"{name}: {path} does not exist"
    assert deployment["work_pool"]["name"] == "assay"
