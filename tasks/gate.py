"""Gate tasks: decide a finished run's gate verdict, record it, report and publish it."""

from __future__ import annotations

from prefect import task
from prefect.artifacts import create_markdown_artifact

from assay.admission.figures import markdown_lines
from assay.findings import Finding, record
from assay.gate.decision import UNCALIBRATED, GateDecision, assess, record_decision
from assay.gate.render import markdown_decision
from assay.runs.records import EvalResult
from assay.subject import Subject
from assay.suites import registry
from tasks._options import IO_RETRIES
from tasks._store import evidence_store
from tasks.artifacts import artifact_key, run_link
from tasks.findings import announce


@task(name="decide-gate", task_run_name="decide-gate", **IO_RETRIES)
def decide_gate(
    store: str, result: EvalResult, max_judge_flip_rate: float | None = None
) -> GateDecision:
    """Apply the gate rules to the run and record the decision (write-once per run)."""
    target = evidence_store(store)
    _, suite = registry.resolve(target, f"{result.suite}@{result.suite_version}")
    return record_decision(target, assess(target, result, suite, max_judge_flip_rate))


@task(name="report-gate-findings", task_run_name="report-gate-findings", **IO_RETRIES)
def report_gate_findings(store: str, decision: GateDecision, result: EvalResult) -> list[Finding]:
    """A `judge_uncalibrated` finding when the run's judge failed calibration (write-once)."""
    failed = {reason.rule: reason.message for reason in decision.reasons}
    if UNCALIBRATED not in failed:
        return []
    finding = Finding(
        kind=UNCALIBRATED,
        run_id=decision.run_id,
        suite=decision.suite,
        suite_version=decision.suite_version,
        subject=decision.subject,
        occurred_at=decision.decided_at,
        summary=f"{decision.suite}@{decision.suite_version} · {decision.subject}: "
        + failed[UNCALIBRATED],
        details=result.judge.model_dump() if result.judge else {},
    )
    record(evidence_store(store), finding)
    announce(finding)
    return [finding]


def publish_gate_artifact(decision: GateDecision) -> None:
    """The gate decision (verdict, every rule, warnings, the judge's admission) as a markdown
    artifact."""
    subject = Subject.parse(decision.subject)
    admission = [] if decision.admission is None else ["", *markdown_lines(decision.admission)]
    create_markdown_artifact(
        markdown="\n".join([markdown_decision(decision, run_link), *admission]),
        key=artifact_key("assay-gate", decision.suite, subject.id, subject.variant or ""),
        description=f"Gate verdict for run {decision.run_id}: {decision.verdict}",
    )
