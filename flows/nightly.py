"""The nightly flow: many suite × subject jobs, each an isolated `suite-run` subflow."""

from __future__ import annotations

from datetime import UTC, datetime

from prefect import flow
from prefect.artifacts import create_markdown_artifact
from pydantic import BaseModel, Field

from assay.runs.records import EvalResult
from assay.verdicts import nightly_verdict
from flows.suite_run import suite_run
from tasks._store import store_reference
from tasks.artifacts import publish_scorecard, run_link
from tasks.verdicts import verdict_state


class NightlyJob(BaseModel):
    """One scheduled evaluation: which suite, which subject, where its outputs are dropped."""

    suite: str = Field(description="`NAME[@VERSION]`, or a suite file in the repo.")
    subject: str = Field(description="`KIND:ID[@VARIANT]`, e.g. `agent:support-bot@v2`.")
    outputs: str = Field(description="Outputs file, folder or `s3://bucket/prefix/`.")
    baseline: str | None = Field(
        default=None,
        description="Run id to compare with; recorded now, used once regression detection lands.",
    )
    sample: int | None = Field(default=None, ge=1, description="Score only N cases.")
    seed: int = Field(default=0, description="Seed for `sample`.")


class JobOutcome(BaseModel):
    """What happened to one nightly job."""

    suite: str
    subject: str
    status: str
    """`completed` or `failed`."""
    run_id: str | None = None
    passed: bool | None = None
    pass_rate: float | None = None
    regression: str | None = None
    """The comparison with the baseline: `regressed`, `inconclusive_noise`, `no_regression`,
    `no_baseline`."""
    error: str | None = None


class NightlyJobsFailedError(RuntimeError):
    """Raised at the end of a nightly run in which some jobs failed (after all of them ran)."""


def _outcome_table(outcomes: list[JobOutcome]) -> str:
    lines = [
        "# Nightly evaluation",
        "",
        "| suite | subject | status | pass rate | verdict | regression | run / error |",
        "|---|---|---|---:|---|---|---|",
    ]
    for o in outcomes:
        rate = "—" if o.pass_rate is None else f"{o.pass_rate:.3f}"
        verdict = "—" if o.passed is None else ("passed" if o.passed else "did not pass")
        regression = (o.regression or "—").replace("_", " ")
        lines.append(
            f"| {o.suite} | {o.subject} | {o.status} | {rate} | {verdict} | {regression} "
            f"| {run_link(o.run_id) if o.run_id else o.error} |"
        )
    return "\n".join(lines)


def _run_name() -> str:
    return f"nightly · {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


@flow(name="nightly", flow_run_name=_run_name, persist_result=False, log_prints=False)
def nightly(
    jobs: list[NightlyJob], store: str | None = None, storage_block: str | None = None
) -> list[JobOutcome]:
    """Run every job as its own `suite-run` subflow; one failing job never stops the others.

    The nightly run fails (after running everything) if any job failed, so the schedule shows red
    in the Prefect UI while every job's evidence is still recorded.
    """
    outcomes: list[JobOutcome] = []
    for job in jobs:
        state = suite_run(
            suite=job.suite,
            outputs=job.outputs,
            subject=job.subject,
            sample=job.sample,
            seed=job.seed,
            store=store,
            storage_block=storage_block,
            return_state=True,
        )
        outcome = JobOutcome(suite=job.suite, subject=job.subject, status="failed")
        if state.is_completed():
            result: EvalResult = state.result()
            outcome = outcome.model_copy(
                update={
                    "status": "completed",
                    "run_id": result.run_id,
                    "passed": result.passed,
                    "pass_rate": result.pass_rate,
                    "regression": result.regression.status.value if result.regression else None,
                }
            )
        else:
            outcome.error = state.message or state.name
        outcomes.append(outcome)
    create_markdown_artifact(
        markdown=_outcome_table(outcomes), key="assay-nightly", description="Nightly job outcomes"
    )
    publish_scorecard(store_reference(store, storage_block))
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        names = ", ".join(f"{o.suite} · {o.subject}" for o in failed)
        raise NightlyJobsFailedError(
            f"{len(failed)} of {len(outcomes)} nightly jobs failed: {names}"
        )
    jobs_passed = [(f"{o.suite} · {o.subject}", o.passed) for o in outcomes]
    return verdict_state(nightly_verdict(jobs_passed), outcomes)
