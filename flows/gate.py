"""The CI gate: run the suite (a suite-run subflow) → decide → record → artifact → findings.

The decision is recorded write-once under `gates/<run_id>.json` and is the *recorded* verdict;
a governed override may later change only the effective verdict (`assay override`). The flow
completes whatever the verdict: a failed gate is a result, not a crash (its artifact and the CLI's
exit code say `fail`).
"""

from __future__ import annotations

from prefect import flow
from prefect.runtime import flow_run

from assay.gate.decision import GateRun
from assay.gate.render import gate_verdict
from flows.suite_run import run_name as suite_run_name
from flows.suite_run import suite_run
from tasks._store import store_reference
from tasks.findings import notify_findings
from tasks.gate import decide_gate, publish_gate_artifact, report_gate_findings
from tasks.verdicts import verdict_state


def _run_name() -> str:
    return f"gate · {suite_run_name(flow_run.parameters)}"


@flow(name="gate", flow_run_name=_run_name, persist_result=False, log_prints=False)
def gate(
    suite: str,
    outputs: str,
    subject: str | None = None,
    sample: int | None = None,
    seed: int = 0,
    store: str | None = None,
    storage_block: str | None = None,
    baseline: str | None = None,
    judge_block: str | None = None,
    fresh_judge: bool = False,
    notification_block: str | None = None,
    calibration: str | None = None,
    judge_repeats: int | None = None,
    max_judge_flip_rate: float | None = None,
    run_id: str | None = None,
) -> GateRun:
    """Run a suite against outputs, then turn regression, pass rate, calibration and budget
    into one recorded verdict.

    Args:
        suite: Published suite reference (`name[@version]`) or a suite file.
        outputs: Path or URI of the candidate outputs (never their content).
        subject: `KIND:ID[@VARIANT]`; defaults to `agent:<outputs name>`.
        sample: Score only this many cases, chosen reproducibly by `seed`.
        seed: Seed for `sample`.
        store: Evidence store URI; defaults to `ASSAY_STORE` or `file://.assay`.
        storage_block: Name of a saved EvidenceStorage block; takes precedence over `store`.
        baseline: Run id to compare with (default: pinned, else the latest comparable run).
        judge_block: Name of a saved JudgeSettings block (default: the environment).
        fresh_judge: Ignore cached verdicts and judge again.
        notification_block: NotificationTarget block that findings are sent to.
        calibration: Calibration set for the PPI++ judge-corrected pass rate (see suite-run).
        judge_repeats: Verdicts per `llm_judge` check (see suite-run).
        max_judge_flip_rate: Fail the gate when the judge's flip rate over repeats is above
            this (or was not measured); no limit by default.
        run_id: The run's id (default: its suite-run's flow run id); `assay serve` names an
            asynchronous run before its flow runs start.

    Returns:
        The recorded gate decision and the run's EvalResult.
    """
    store_uri = store_reference(store, storage_block)
    result = suite_run(
        suite=suite,
        outputs=outputs,
        subject=subject,
        sample=sample,
        seed=seed,
        store=store_uri,
        baseline=baseline,
        notification_block=notification_block,
        judge_block=judge_block,
        fresh_judge=fresh_judge,
        calibration=calibration,
        judge_repeats=judge_repeats,
        run_id=run_id,
    )
    decision = decide_gate(store_uri, result, max_judge_flip_rate)
    publish_gate_artifact(decision)
    findings = report_gate_findings(store_uri, decision, result)
    if findings and notification_block:
        notify_findings(notification_block, findings)
    return verdict_state(gate_verdict(decision), GateRun(decision=decision, result=result))
