"""Bearer tokens → the principals of `assay access` (SPEC §15).

`Authorization: Bearer TOKEN` is identified by `assay.access.identify` against the hashed
principal records in the evidence store (tokens are never stored), on every request, so a
rotated-out token stops working at once. `require_tier(...)` is the reusable dependency:
401 for a missing, malformed or unknown token, 403 for a tier too low.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from assay.api.problems import Problem
from assay.api.settings import ServeSettings
from assay.gate.access import Principal, Tier, identify
from assay.store import EvidenceStore

TierName = Literal["viewer", "operator", "admin"]

_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="assay"'}
_STARTED = datetime.now(UTC)


def evidence(request: Request) -> EvidenceStore:
    """The service's evidence store (opened once, when the app was made)."""
    store: EvidenceStore = request.app.state.store
    return store


Store = Annotated[EvidenceStore, Depends(evidence)]


_BEARER = HTTPBearer(
    scheme_name="bearer",
    description="A token from `assay access add NAME --tier viewer|operator|admin`.",
    auto_error=False,
)
"""Declares the `bearer` security scheme (OpenAPI `securitySchemes`) on every route that needs a
token, so Swagger's Authorize sends it; the checks are `require_tier`'s."""


def bearer_token(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
) -> str | None:
    """The token of an `Authorization: Bearer TOKEN` header; None when absent or another scheme."""
    if credentials is None or not credentials.credentials.strip():
        return None
    return credentials.credentials.strip()


Token = Annotated[str | None, Depends(bearer_token)]


LOCAL_PRINCIPAL = "local"
"""The name the lasting local service's caller (`assay server start`) is audited under."""


def local_user(request: Request, token: str) -> Principal | None:
    """The machine's user, when `token` is the local service's credential (an admin: the
    user owns the store); None otherwise, and always on a service started without one."""
    settings: ServeSettings = request.app.state.settings
    local = settings.local_token
    if local is None or not hmac.compare_digest(token, local.get_secret_value()):
        return None
    return Principal(name=LOCAL_PRINCIPAL, tier=Tier.ADMIN, since=_STARTED, added_by="local")


def is_local(request: Request, token: str | None) -> bool:
    """Whether the caller holds the local service's credential (it may name local paths)."""
    return token is not None and local_user(request, token) is not None


def require_tier(tier: TierName) -> Callable[..., Awaitable[Principal]]:
    """A dependency that yields the caller's principal when its tier includes `tier`."""
    needed = Tier(tier)

    async def caller(request: Request, store: Store, token: Token) -> Principal:
        if token is None:
            raise Problem(
                401, "send Authorization: Bearer TOKEN", kind="unauthorized", headers=_CHALLENGE
            )
        principal = local_user(request, token) or await run_in_threadpool(identify, store, token)
        if principal is None:
            raise Problem(
                401, "unknown or rotated-out token", kind="unauthorized", headers=_CHALLENGE
            )
        if not principal.tier.at_least(needed):
            raise Problem(
                403,
                f"this needs the {needed} tier; {principal.name} is {principal.tier}",
                kind="forbidden",
            )
        return principal

    return caller


Viewer = Annotated[Principal, Depends(require_tier("viewer"))]
Operator = Annotated[Principal, Depends(require_tier("operator"))]
