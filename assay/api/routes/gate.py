"""The CI gate over HTTP: `POST /gate` runs the gate flow; `GET /gates/{run_id}` re-checks;
`POST /gate/what-if` recomputes a recorded run's decision at other thresholds (no judge call,
nothing recorded)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store, Viewer
from assay.api.problems import AUTHENTICATED, documented
from assay.api.requests import GateRequest
from assay.api.routes.runs import ACCEPTED, PLANNED, RUN_ID, PlanQuery, RunId, Submit, answered
from assay.gate.decision import GateDecision, GateReport, GateRun, load_decision, what_if
from assay.gate.overrides import GateCheck, check_gate
from assay.reports.link_key import report_link_key
from assay.runs.options import option_field
from assay.runs.records import load_result
from assay.store import EvidenceStore

router = APIRouter(tags=["gate"], responses=AUTHENTICATED | documented(404, 409, 429))


def _report(store: EvidenceStore, run_id: str) -> GateReport:
    run = GateRun(decision=load_decision(store, run_id), result=load_result(store, run_id))
    return GateReport.of(run, report_link_key(store, run_id))


@router.post("/gate", response_model=GateReport, responses=ACCEPTED | PLANNED)
async def run_gate(body: GateRequest, submission: Submit, plan: PlanQuery = False) -> Any:
    """Run the suite in the gate flow and return the recorded decision (verdict, reasons,
    warnings, rules, the EvalResult): HTTP 200 whatever the verdict. With `Prefer:
    respond-async`: 202 at once, as `POST /runs`; the decision is then at `/gates/{run_id}`.
    With `plan=true`: the cost plan of its suite run (as `POST /runs?plan=true`), nothing run."""
    planned = await answered(submission, body, "gate", plan)
    if planned is not None:
        return planned
    run_id = await submission.run(body, "gate")
    if submission.respond_async:
        return await submission.accepted(run_id)
    return await run_in_threadpool(_report, submission.store, run_id)


@router.get("/gates/{run_id}", response_model=GateCheck)
async def gate_check(run_id: RunId, store: Store, _: Viewer) -> GateCheck:
    """The recorded verdict and the effective one (after governed overrides): what CI
    re-checks."""
    return await run_in_threadpool(check_gate, store, run_id)


class WhatIf(BaseModel):
    """A what-if gate: a recorded run and the thresholds to decide it with."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(pattern=RUN_ID)
    pass_threshold: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    min_coverage: float | None = Field(default=None, ge=0.0, le=1.0, allow_inf_nan=False)
    max_judge_flip_rate: float | None = option_field("max_judge_flip_rate")


@router.post("/gate/what-if", response_model=GateDecision)
async def gate_what_if(body: WhatIf, store: Store, _: Viewer) -> GateDecision:
    """The decision the run would get at these thresholds (`what_if: true`), from its stored
    verdicts: no judge call, nothing recorded, the recorded decision untouched."""
    return await run_in_threadpool(
        what_if,
        store,
        body.run_id,
        body.pass_threshold,
        body.min_coverage,
        body.max_judge_flip_rate,
    )
