"""`POST /overrides` (admin): a governed override of a failed gate, audited whatever happens.

The tier is not checked by a dependency here: `assay.overrides.request_override` checks it and
audits the attempt, so a principal's refused call — a viewer's or operator's token, a short
reason, a run the gate never decided — leaves its audit record like a granted one. A call with no
or an unknown token writes nothing (401), and a reason over `MAX_REASON` characters is 422 before
anything runs. The status says why: 401 no or unknown token, 403 not an admin, 422 reason too
short or too long, 404 no gate decision, 409 nothing to override (already pass, or already
overridden). A refusal's problem carries the audited attempt without its reason: no problem
echoes the request body.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Store, Token
from assay.api.problems import documented, problem_response
from assay.gate.access import Tier
from assay.gate.overrides import (
    MAX_REASON,
    MIN_REASON,
    OverrideRecord,
    request_override,
)
from assay.identifiers import Identifier

router = APIRouter(tags=["overrides"], responses=documented(413))


class OverrideRequest(BaseModel):
    """The run whose failed gate is a false alarm, and why."""

    model_config = ConfigDict(extra="forbid")

    run_id: Identifier = Field(min_length=1)
    reason: str = Field(
        max_length=MAX_REASON,
        description=f"{MIN_REASON} to {MAX_REASON} characters; kept in the audit.",
    )


def _status(record: OverrideRecord) -> int:
    if record.refusal is None:
        return 201
    if not record.audited:
        return 401
    if record.tier is not Tier.ADMIN:
        return 403
    if len(record.reason) < MIN_REASON:
        return 422
    if record.recorded_verdict is None:
        return 404
    return 409


@router.post(
    "/overrides",
    response_model=OverrideRecord,
    status_code=201,
    responses=documented(401, 403, 404, 409, 422),
)
async def override(body: OverrideRequest, store: Store, token: Token) -> JSONResponse:
    """Override a failed gate (admin tier): the effective verdict becomes pass, the recorded
    one stays. Every attempt by a principal appends an audit record, returned in the body
    either way (a refusal's without its reason); no or an unknown token writes nothing."""
    record = await run_in_threadpool(request_override, store, body.run_id, token, body.reason)
    status = _status(record)
    if status == 201:
        return JSONResponse(record.model_dump(mode="json"), status_code=201)
    if status == 401:
        return problem_response(
            status,
            f"{record.refusal} (nothing recorded)",
            kind="override-refused",
            headers={"WWW-Authenticate": 'Bearer realm="assay"'},
        )
    return problem_response(
        status,
        f"{record.refusal} (attempt audited)",
        kind="override-refused",
        attempt=record.model_dump(mode="json", exclude={"reason"}),
    )
