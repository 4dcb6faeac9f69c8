"""The nightly flow: many suite × subject jobs, each an isolated `suite-run` run.

With `job_deployment`, every job is its own flow run of that deployment, picked up by any worker
of its pool on any machine; at most `max_parallel` are in flight at once, and each is started at
most once per night: its idempotency key is the night and the job, so a retried or re-triggered
nightly waits on the runs already started instead of starting them again. Without it, the jobs
run one after another as subflows in this process.

Every regression test the night's runs made is then adjusted for multiplicity
(`assay.multiplicity`): the runs against their baselines as one family (Holm: which `regressed`
survive), their tag / check kind / turn slices as another (Benjamini–Hochberg); the families are
declared, test by test, in the `assay-nightly` artifact.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from prefect.artifacts import create_markdown_artifact
from prefect.futures import PrefectFuture, as_completed
from prefect.runtime import flow_run
from pydantic import BaseModel, ConfigDict, Field

from assay.choices import StoreChoice
from assay.multiplicity import Family, figure, markdown
from assay.runs.edges import NIGHTLY_JOB
from assay.runs.options import RunOptions
from assay.runs.records import EvalResult
from assay.runs.render import nightly_verdict
from assay.verdicts import FlowVerdict
from flows._conventions import assay_flow, run_subflow
from flows.suite_run import suite_run
from tasks._store import store_reference
from tasks.artifacts import publish_scorecard, run_link
from tasks.nightly import LaunchedJob, NightFamilies, adjust_night, run_job
from tasks.verdicts import verdict_result

DEFAULT_MAX_PARALLEL = 4


class NightlyJobBody(BaseModel):
    """One scheduled evaluation: which suite, which subject, where its outputs are dropped
    (`NightlyJob` adds every run option a job may set)."""

    model_config = ConfigDict(extra="forbid")

    suite: str = Field(description="`NAME[@VERSION]`, or a suite file in the repo.")
    subject: str = Field(description="`KIND:ID[@VARIANT]`, e.g. `agent:support-bot@v2`.")
    outputs: str = Field(description="Outputs file, folder or `s3://bucket/prefix/`.")

    def options(self, store: str | None, storage_block: str | None) -> RunOptions:
        """The job's suite-run options (validated with every bound when the job is started)."""
        return RunOptions.model_validate(
            {**self.model_dump(), "store": store, "storage_block": storage_block}
        )


if TYPE_CHECKING:  # built at import; a type checker sees its base
    NightlyJob = NightlyJobBody
else:
    NightlyJob = NIGHTLY_JOB.model("NightlyJob", NightlyJobBody, RunOptions)


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
    raw_p: float | None = None
    """The p of the regression test (None without a baseline), and below, adjusted (Holm) over
    the night's runs; `survives`: regressed, and still at Holm p ≤ 0.05 (a suite's primary
    comparison: regressed, decided alone)."""
    holm_p: float | None = None
    survives: bool | None = None
    error: str | None = None


def job_key(night: str, job: NightlyJob) -> str:
    """The idempotency key of `job` on `night`: the same job is started once a night."""
    # Options left at their default do not count: a new option does not restart every job.
    digest = hashlib.sha256(job.model_dump_json(exclude_defaults=True).encode()).hexdigest()[:24]
    return f"assay-nightly/{night}/{digest}"


def _outcome(job: NightlyJob, result: EvalResult | None, error: str | None) -> JobOutcome:
    if result is None:
        return JobOutcome(suite=job.suite, subject=job.subject, status="failed", error=error)
    return JobOutcome(
        suite=job.suite,
        subject=job.subject,
        status="completed",
        run_id=result.run_id,
        passed=result.passed,
        pass_rate=result.pass_rate,
        regression=result.regression.status.value if result.regression else None,
    )


class NightlyJobsFailedError(RuntimeError):
    """Raised at the end of a nightly run in which some jobs failed (after all of them ran)."""


def _outcome_table(outcomes: list[JobOutcome]) -> str:
    lines = [
        "# Nightly evaluation",
        "",
        "| suite | subject | status | pass rate | verdict | regression | raw p | Holm p "
        "| survives | run / error |",
        "|---|---|---|---:|---|---|---:|---:|---|---|",
    ]
    for o in outcomes:
        rate = "—" if o.pass_rate is None else f"{o.pass_rate:.3f}"
        verdict = "—" if o.passed is None else ("passed" if o.passed else "did not pass")
        regression = (o.regression or "—").replace("_", " ")
        survives = "—" if o.survives is None else ("yes" if o.survives else "no")
        lines.append(
            f"| {o.suite} | {o.subject} | {o.status} | {rate} | {verdict} | {regression} "
            f"| {figure(o.raw_p)} | {figure(o.holm_p)} | {survives} "
            f"| {run_link(o.run_id) if o.run_id else o.error} |"
        )
    return "\n".join(lines)


def _with_figures(outcomes: list[JobOutcome], regressions: Family) -> list[JobOutcome]:
    tests = {test.run_id: test for test in [*regressions.tests, *regressions.excluded]}
    return [
        o
        if o.run_id not in tests
        else o.model_copy(
            update={
                "raw_p": tests[o.run_id].raw_p,
                "holm_p": tests[o.run_id].holm_p,
                "survives": tests[o.run_id].survives,
            }
        )
        for o in outcomes
    ]


def _report(outcomes: list[JobOutcome], night: NightFamilies) -> str:
    return "\n\n".join(
        [
            _outcome_table(outcomes),
            "## Multiplicity: every regression test of the night",
            markdown(night.regressions),
            markdown(night.slices),
        ]
    )


def _in_process(job: NightlyJob, store: str | None, storage_block: str | None) -> JobOutcome:
    state = run_subflow(suite_run, job.options(store, storage_block))
    try:
        return _outcome(job, verdict_result(state), None)
    except Exception:
        return _outcome(job, None, state.message or state.name)


def _fan_out(
    jobs: list[NightlyJob],
    store: str | None,
    storage_block: str | None,
    deployment: str,
    max_parallel: int,
    night: str | None,
) -> list[JobOutcome]:
    """Start every job as a deployment run, `max_parallel` in flight, and collect outcomes."""
    reference = store_reference(store, storage_block)
    night = night or f"{flow_run.scheduled_start_time:%Y-%m-%d}"
    launched: list[PrefectFuture[LaunchedJob]] = []
    in_flight: list[PrefectFuture[LaunchedJob]] = []
    for job in jobs:
        if len(in_flight) >= max_parallel:
            in_flight.remove(next(as_completed(in_flight)))
        # A worker on another machine has its own defaults: name the store explicitly.
        options = job.options(None if storage_block else reference, storage_block)
        parameters: dict[str, Any] = {"options": options.model_dump(mode="json")}
        future = run_job.submit(
            deployment, parameters, job_key(night, job), reference, f"{job.suite} · {job.subject}"
        )
        launched.append(future)
        in_flight.append(future)
    done = [future.result() for future in launched]
    return [_outcome(job, run.result, run.error) for job, run in zip(jobs, done, strict=True)]


class NightlyOptions(StoreChoice):
    """A night's jobs, where their evidence goes, and where they run."""

    jobs: list[NightlyJob] = Field(description="The suite × subject jobs.")
    job_deployment: str | None = Field(
        default=None,
        description="`suite-run/DEPLOYMENT` to start each job as a flow run of (on a work "
        "pool); default: run the jobs here, one after another.",
    )
    max_parallel: int = Field(
        default=DEFAULT_MAX_PARALLEL,
        ge=1,
        description="Job runs in flight at once (with `job_deployment`).",
    )
    night: str | None = Field(
        default=None,
        description="Which night this is, for the jobs' idempotency keys (default: the UTC date "
        "of this run's scheduled start). A new value starts every job again.",
    )


def _run_name(options: NightlyOptions) -> str:
    return f"nightly · {datetime.now(UTC):%Y-%m-%d %H:%M} UTC"


def _verdict(outcomes: list[JobOutcome]) -> FlowVerdict:
    return nightly_verdict([(f"{o.suite} · {o.subject}", o.passed) for o in outcomes])


@assay_flow(run_name=_run_name, verdict=_verdict)
def nightly(options: NightlyOptions) -> list[JobOutcome]:
    """Run every job as its own `suite-run`; one failing job never stops the others.

    The nightly run fails (after running everything) if any job failed, so the schedule shows red
    in the Prefect UI while every job's evidence is still recorded.

    Args:
        options: The jobs, the store, and where the jobs run (`NightlyOptions`).
    """
    store, storage_block = options.store, options.storage_block
    if options.job_deployment:
        outcomes = _fan_out(
            options.jobs,
            store,
            storage_block,
            options.job_deployment,
            options.max_parallel,
            options.night,
        )
    else:
        outcomes = [_in_process(job, store, storage_block) for job in options.jobs]
    reference = store_reference(store, storage_block)
    completed = [o.run_id for o in outcomes if o.run_id is not None]
    night = adjust_night(reference, completed, str(flow_run.id))
    outcomes = _with_figures(outcomes, night.regressions)
    create_markdown_artifact(
        markdown=_report(outcomes, night),
        key="assay-nightly",
        description="Nightly job outcomes, and every regression test adjusted for multiplicity",
    )
    publish_scorecard(reference)
    failed = [o for o in outcomes if o.status == "failed"]
    if failed:
        names = ", ".join(f"{o.suite} · {o.subject}" for o in failed)
        raise NightlyJobsFailedError(
            f"{len(failed)} of {len(outcomes)} nightly jobs failed: {names}"
        )
    return outcomes
