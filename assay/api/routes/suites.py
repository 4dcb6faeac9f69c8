"""Suites: publish a suite document, list suites, read the latest or any version."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Operator, Store, Viewer
from assay.api.problems import AUTHENTICATED, documented
from assay.documents import decoded_text
from assay.suites import registry
from assay.suites.registry import SuiteVersion
from assay.suites.suite import SLUG, parse_suite

router = APIRouter(tags=["suites"], responses=AUTHENTICATED | documented(404))

SuiteName = Annotated[str, Path(pattern=SLUG, max_length=64)]

BODY_SOURCE = "body.json"
"""How input errors name a published document (with its line and field, as the CLI does)."""


class VersionInfo(BaseModel):
    """A published version (what `assay suite publish --json` prints)."""

    suite: str
    version: int
    content_hash: str
    published_at: datetime
    cases: int


class Published(VersionInfo):
    """`POST /suites`: the version, and whether this request created it."""

    created: bool


class SuiteDocument(VersionInfo):
    """A version with its canonical document (re-publishable as is)."""

    document: dict[str, Any]


def _info(version: SuiteVersion) -> dict[str, Any]:
    return version.model_dump(mode="json", exclude={"case_hashes"})


def _publish(store: Store, text: str) -> tuple[SuiteVersion, bool]:
    return registry.publish(store, parse_suite(text, BODY_SOURCE))


@router.post(
    "/suites",
    response_model=Published,
    status_code=201,
    responses={200: {"model": Published, "description": "Identical content: the existing one"}},
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
async def publish_suite(request: Request, store: Store, _: Operator) -> JSONResponse:
    """Publish a suite document (JSON): 201 with a new version, 200 when identical to the
    latest (nothing published). Errors name the line and field of the body; a body that is not
    UTF-8 is 422 naming its line (as the CLI refuses the file)."""
    text = decoded_text(await request.body(), BODY_SOURCE)
    version, created = await run_in_threadpool(_publish, store, text)
    body = Published(**_info(version), created=created)
    return JSONResponse(body.model_dump(mode="json"), status_code=201 if created else 200)


def _latest_versions(store: Store) -> list[SuiteVersion]:
    latest = [registry.latest_version(store, name) for name in registry.suite_names(store)]
    return [version for version in latest if version is not None]


@router.get("/suites", response_model=list[VersionInfo])
async def list_suites(store: Store, _: Viewer) -> list[dict[str, Any]]:
    """Every published suite with its latest version."""
    return [_info(v) for v in await run_in_threadpool(_latest_versions, store)]


def _document(store: Store, ref: str) -> dict[str, Any]:
    version, suite = registry.resolve(store, ref)
    return {**_info(version), "document": suite.document()}


@router.get("/suites/{name}", response_model=SuiteDocument)
async def latest_suite(name: SuiteName, store: Store, _: Viewer) -> dict[str, Any]:
    """The latest version of a suite, with its document."""
    return await run_in_threadpool(_document, store, name)


@router.get("/suites/{name}/versions/{version}", response_model=SuiteDocument)
async def suite_version(
    name: SuiteName, version: Annotated[int, Path(ge=1)], store: Store, _: Viewer
) -> dict[str, Any]:
    """Any published version, rebuilt exactly as it was published."""
    return await run_in_threadpool(_document, store, f"{name}@{version}")
