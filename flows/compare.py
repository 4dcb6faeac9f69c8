"""Pairwise A/B comparison: resolve the suite → judge each shared case in both orders → report.

Both output sets travel by reference (paths or URIs): Prefect records every flow parameter, so
the flow never receives output text. The report holds counts only and is written once to the
evidence store as `comparisons/<comparison id>.json` (the id is this flow run's id).
"""

from __future__ import annotations

from pathlib import Path

from prefect.runtime import flow_run

from assay.pairwise.options import CompareOptions
from assay.pairwise.report import PairwiseReport
from flows._conventions import assay_flow
from tasks._store import store_reference
from tasks.compare import compare_pairwise, publish_comparison_artifact
from tasks.suites import resolve_suite


def _run_name(options: CompareOptions) -> str:
    suite = options.suite
    name = Path(suite).name if Path(suite).is_file() else suite
    return f"{name} · {options.label_a} vs {options.label_b}"


@assay_flow(run_name=_run_name, verdict=None)
def compare(options: CompareOptions) -> PairwiseReport:
    """Compare two subjects' outputs on one suite with a pairwise judge, order swapped.

    Returns:
        The report: wins A / wins B / ties / inconsistent with their denominators, win rates
        and position consistency with Wilson intervals, calls, cache hits and cost.
    """
    store_uri = store_reference(options.store, options.storage_block)
    version = resolve_suite(store_uri, options.suite)
    report = compare_pairwise(
        store_uri,
        version.ref,
        options.outputs_a,
        options.outputs_b,
        str(flow_run.id),
        options.label_a,
        options.label_b,
        options.judge_block,
        options.fresh_judge,
    )
    publish_comparison_artifact(report)
    return report
