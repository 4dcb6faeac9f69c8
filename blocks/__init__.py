"""Prefect Block types that configure Assay (SPEC §14).

Register them with `prefect block register -m blocks` (from the repo root, or with the package
installed). Flows take a block name and fall back to the environment defaults when none is given.
"""

from blocks.dask_cluster import DaskCluster
from blocks.evidence_storage import EvidenceStorage
from blocks.finops_budget import FinOpsBudget
from blocks.judge_settings import JudgeSettings
from blocks.notification_target import NotificationTarget

__all__ = ["DaskCluster", "EvidenceStorage", "FinOpsBudget", "JudgeSettings", "NotificationTarget"]
