"""Pairwise A/B comparison: resolve the suite → judge each shared case in both orders → report.

Both output sets travel by reference (paths or URIs): Prefect records every flow parameter, so
the flow never receives output text. The report holds counts only and is written once to the
evidence store as `comparisons/<comparison id>.json` (the id is this flow run's id).
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

from assay.pairwise.report import PairwiseReport
from flows.launch import untagged_tasks
from tasks._store import store_reference
from tasks.compare import compare_pairwise, publish_comparison_artifact
from tasks.suites import resolve_suite


def _run_name() -> str:
    parameters = flow_run.parameters
    suite = str(parameters["suite"])
    name = Path(suite).name if Path(suite).is_file() else suite
    return f"{name} · {parameters.get('label_a', 'A')} vs {parameters.get('label_b', 'B')}"


@flow(name="compare", flow_run_name=_run_name, persist_result=False, log_prints=False)
def compare(
    suite: str,
    outputs_a: str,
    outputs_b: str,
    label_a: str = "A",
    label_b: str = "B",
    store: str | None = None,
    storage_block: str | None = None,
    judge_block: str | None = None,
    fresh_judge: bool = False,
) -> PairwiseReport:
    """Compare two subjects' outputs on one suite with a pairwise judge, order swapped.

    Args:
        suite: Published suite reference, `name@version` (or `name` for the latest), or a
            suite file, which is published first.
        outputs_a: Path or URI of a JSONL file or folder with side A's outputs.
        outputs_b: Path or URI of side B's outputs.
        label_a: Name of side A in the report (e.g. `v1`).
        label_b: Name of side B in the report.
        store: Evidence store URI; defaults to `ASSAY_STORE` or `file://.assay`.
        storage_block: Name of a saved EvidenceStorage block; takes precedence over `store`.
        judge_block: Name of a saved JudgeSettings block (default: `ASSAY_JUDGE_MODEL`,
            `OPENAI_API_KEY`, `OPENAI_BASE_URL`; neither: every pair is unjudged).
        fresh_judge: Ignore cached pairwise verdicts and judge again.

    Returns:
        The report: wins A / wins B / ties / inconsistent with their denominators, win rates
        and position consistency with Wilson intervals, calls, cache hits and cost.
    """
    with untagged_tasks():  # the flow run carries the tags
        store_uri = store_reference(store, storage_block)
        version = resolve_suite(store_uri, suite)
        report = compare_pairwise(
            store_uri,
            version.ref,
            outputs_a,
            outputs_b,
            str(flow_run.id),
            label_a,
            label_b,
            judge_block,
            fresh_judge,
        )
        publish_comparison_artifact(report)
        return report
