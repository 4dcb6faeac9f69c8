"""Release signals (SPEC §12, seed 002): five denominators and evidence gates, not one score.

Per variant, task quality, useful progress, tool-effect integrity, cost per verified result and
the false-success rate stay separate; evidence coverage and external effects are gated before
any average is looked at. Modules: `trials` (records and JSONL loading), `contract`
(thresholds), `signals` (counting), `gates` (the fixed order), `report` (the recorded report),
`render` (the table shared by the CLI and the flow's artifact). Nothing here imports Prefect.
"""

from assay.release.contract import ReleaseContract, load_contract
from assay.release.gates import GATE_ORDER, GateCheck, GateName, GateResult, GateVerdict
from assay.release.render import COLUMNS, markdown_report, row, stop_lines
from assay.release.report import (
    REPORT_PREFIX,
    ReleaseReport,
    VariantReport,
    build_report,
    load_report,
    record_report,
    report_key,
)
from assay.release.signals import Signals, measure
from assay.release.trials import Trial, load_trials

__all__ = [
    "COLUMNS",
    "GATE_ORDER",
    "REPORT_PREFIX",
    "GateCheck",
    "GateName",
    "GateResult",
    "GateVerdict",
    "ReleaseContract",
    "ReleaseReport",
    "Signals",
    "Trial",
    "VariantReport",
    "build_report",
    "load_contract",
    "load_report",
    "load_trials",
    "markdown_report",
    "measure",
    "record_report",
    "report_key",
    "row",
    "stop_lines",
]
