"""The release report: every variant's signals and gate verdict, recorded write-once.

The report holds counts, rates, thresholds, variant names and the trials *reference* only — no
trial text (task classes, wait owners and decisions, tool names stay in the trials file). It is
written once as `releases/<report_id>.json`. In the `release` flow the id is the flow run id;
built outside a flow, it is the content hash of the report, so the same trials and contract
give the same id and the same object.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from pydantic import BaseModel, ConfigDict

from assay.canonical import content_hash
from assay.release.contract import ReleaseContract
from assay.release.gates import GateVerdict, evaluate
from assay.release.signals import Signals, measure
from assay.release.trials import Trial
from assay.store import EvidenceStore
from assay.store.write_once import Shelf

REPORT_PREFIX: Final = "releases/"


class VariantReport(Signals):
    """One variant: its five signals, unverified completions and the gate verdict."""

    gate: GateVerdict


class ReleaseReport(BaseModel):
    """Release signals for every variant in a trials file, in order of first appearance."""

    model_config = ConfigDict(frozen=True)

    report_id: str
    source: str
    """Reference (path or URI) of the trials file the report was computed from."""
    contract: ReleaseContract
    created_at: datetime
    passed: bool
    """True when every variant passed every gate."""
    variants: list[VariantReport]


def build_report(
    trials: Sequence[Trial],
    contract: ReleaseContract,
    source: str,
    report_id: str | None = None,
    now: datetime | None = None,
) -> ReleaseReport:
    """Measure and gate each variant of `trials`.

    Args:
        trials: Validated trials, in file order (`load_trials`).
        contract: The thresholds.
        source: The trials reference, recorded in the report.
        report_id: The flow run id; None gives the content hash of the report (hex digest).
        now: Evaluation time, recorded as `created_at`; waits that expired before it are stale
            (see `assay.release.signals.active_windows`). None means the current time.
    """
    now = now or datetime.now(UTC)
    by_variant: dict[str, list[Trial]] = {}
    for trial in trials:
        by_variant.setdefault(trial.variant, []).append(trial)
    variants = []
    for name, rows in by_variant.items():
        signals, coverage = measure(name, rows, now)
        variants.append(VariantReport(**dict(signals), gate=evaluate(signals, coverage, contract)))
    content = {
        "source": source,
        "contract": contract.model_dump(mode="json"),
        "variants": [v.model_dump(mode="json") for v in variants],
    }
    return ReleaseReport(
        report_id=report_id or content_hash(content).removeprefix("sha256:"),
        source=source,
        contract=contract,
        created_at=now,
        passed=all(v.gate.passed for v in variants),
        variants=variants,
    )


_REPORTS = Shelf(REPORT_PREFIX, ReleaseReport)
report_key = _REPORTS.key
"""Where a release report is kept: `releases/<report_id>.json`."""
load_report = _REPORTS.get


def record_report(store: EvidenceStore, report: ReleaseReport) -> ReleaseReport:
    """Write the report once; when one is already there (a retry), return that first one."""
    return _REPORTS.put(store, report.report_id, report)
