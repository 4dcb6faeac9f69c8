"""Pairwise A/B comparison: judge both output sets case by case, order swapped, and report.

One task does the reading, judging and writing, so output text never becomes a task argument or
result: it receives references and returns the counts-only `PairwiseReport`.
"""

from __future__ import annotations

from prefect import get_run_logger, task
from prefect.artifacts import create_markdown_artifact

from assay.pairwise.compare import compare_outputs, pairwise_setup
from assay.pairwise.render import markdown_report
from assay.pairwise.report import PairwiseReport
from assay.suites import registry
from blocks.judge_settings import judge_setup
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.artifacts import artifact_key


@task(name="compare-pairwise", task_run_name="compare {label_a} vs {label_b}", **IO_RETRIES)
def compare_pairwise(
    store: str,
    suite_ref: str,
    outputs_a: str,
    outputs_b: str,
    comparison_id: str,
    label_a: str = "A",
    label_b: str = "B",
    judge_block: str | None = None,
    fresh_judge: bool = False,
) -> PairwiseReport:
    """Judge every shared case with a rubric twice (A first, then B first) and record the report.

    The judge, its concurrency, prices and the budgets come from `judge_setup` (the JudgeSettings
    block, else the environment), turned to the pairwise prompt. A retry after a store failure
    finds the verdicts already paid for in the cache.
    """
    target = evidence_store(store)
    version, suite = registry.resolve(target, suite_ref)
    setup = pairwise_setup(judge_setup(judge_block, fresh_judge))
    report = compare_outputs(
        target,
        version,
        suite,
        outputs_a,
        outputs_b,
        setup,
        comparison_id=comparison_id,
        label_a=label_a,
        label_b=label_b,
    )
    if report.unjudged:
        reasons = ", ".join(f"{k}: {v}" for k, v in report.unjudged_reasons.items())
        get_run_logger().warning(
            "%d of %d pair(s) unjudged and excluded from the rates (%s)",
            report.unjudged,
            report.cases_compared,
            reasons,
        )
    return report


def publish_comparison_artifact(report: PairwiseReport) -> None:
    """The comparison table (outcomes with denominators, rates with intervals, and the tags'
    sign tests adjusted together) as markdown."""
    create_markdown_artifact(
        markdown=markdown_report(report),
        key=artifact_key("assay-compare", report.suite, report.label_a, "vs", report.label_b),
        description=(
            f"Pairwise comparison {report.label_a} vs {report.label_b} on "
            f"{report.suite}@{report.suite_version}: wins, ties, inconsistent pairs, "
            "win rates and position consistency (Wilson 95%); per tag, a sign test of the "
            "wins, the tags adjusted together (raw p, Holm p, BH q)."
        ),
    )
