"""Prefect Block types that configure Assay (SPEC §14).

Register them with `prefect block register -m blocks` (from the repo root, or with the package
installed). Flows take a block name and fall back to the environment defaults when none is given.

Each type is imported on first use: `EvidenceStorage` needs prefect-aws (about 2 s of imports,
boto3 and prefect-aws's workers among them), which a run that only sends a notification, or
none, should not pay.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from blocks.dask_cluster import DaskCluster
    from blocks.evidence_storage import EvidenceStorage
    from blocks.finops_budget import FinOpsBudget
    from blocks.judge_settings import JudgeSettings
    from blocks.notification_target import NotificationTarget

_MODULES = {
    "DaskCluster": "blocks.dask_cluster",
    "EvidenceStorage": "blocks.evidence_storage",
    "FinOpsBudget": "blocks.finops_budget",
    "JudgeSettings": "blocks.judge_settings",
    "NotificationTarget": "blocks.notification_target",
}

__all__ = ["DaskCluster", "EvidenceStorage", "FinOpsBudget", "JudgeSettings", "NotificationTarget"]


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return getattr(import_module(_MODULES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
