"""The CI gate: run the suite (a suite-run subflow) → decide → record → findings → artifact.

The decision is recorded write-once under `gates/<run_id>.json` and is the *recorded* verdict;
a governed override may later change only the effective verdict (`assay override`). A failed gate
is a result, not a crash: the flow run ends Failed named `Gate failed` and still holds its GateRun
(its artifact and the CLI's exit code say `fail`).
"""

from __future__ import annotations

from assay.gate.decision import GateRun
from assay.gate.render import gate_verdict
from assay.runs.options import GateOptions
from assay.verdicts import FlowVerdict
from flows._conventions import assay_flow, publish_run_report, run_subflow, tell_caller
from flows.suite_run import run_name as suite_run_name
from flows.suite_run import suite_run
from tasks._store import store_reference
from tasks.findings import notify_findings
from tasks.gate import decide_gate, publish_gate_artifact, report_gate_findings
from tasks.verdicts import verdict_result


def _run_name(options: GateOptions) -> str:
    return f"gate · {suite_run_name(options)}"


def _verdict(run: GateRun) -> FlowVerdict:
    return gate_verdict(run.decision)


@assay_flow(run_name=_run_name, verdict=_verdict, publishes_subflow_reports=True)
def gate(options: GateOptions) -> GateRun:
    """Run a suite against outputs, then turn regression, pass rate, calibration and budget
    into one recorded verdict.

    Args:
        options: The suite run's options and `max_judge_flip_rate`
            (`assay.runs.options.GateOptions`, docs/configuration.md).

    Returns:
        The recorded gate decision and the run's EvalResult; the flow run ends `Gate passed`
        (Completed) or `Gate failed` (Failed).
    """
    store_uri = store_reference(options.store, options.storage_block)
    # The suite run is a subflow whose negative verdict is a Failed state that still holds its
    # EvalResult: taken as a state, it does not fail this flow; its report is this flow's to
    # write, once, with the decision.
    run = run_subflow(suite_run, options.run().model_copy(update={"store": store_uri}))
    result = verdict_result(run)
    decision = decide_gate(store_uri, result, options.max_judge_flip_rate)
    findings = report_gate_findings(store_uri, decision, result)
    outcome = GateRun(decision=decision, result=result)
    tell_caller(outcome)  # the records are complete
    publish_gate_artifact(decision)
    publish_run_report(store_uri, result.run_id)
    if findings and options.notification_block:
        notify_findings(options.notification_block, findings)
    return outcome
