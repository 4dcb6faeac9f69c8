"""Baselines: pin a run, show the pin of a suite and subject, unpin (append-only, as the CLI)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from assay.api.auth import Operator, Store, Viewer
from assay.api.inputs import subject_param
from assay.api.problems import AUTHENTICATED, documented
from assay.errors import NotFoundError
from assay.identifiers import Identifier
from assay.runs import baselines
from assay.runs.baselines import PinRecord
from assay.store import EvidenceStore
from assay.subject import Subject
from assay.suites import registry

router = APIRouter(tags=["baselines"], responses=AUTHENTICATED | documented(404))


class PinRequest(BaseModel):
    """A completed run to compare later runs of its suite and subject with."""

    model_config = ConfigDict(extra="forbid")

    run_id: Identifier = Field(min_length=1)


class Pinned(BaseModel):
    """What `assay baseline show --json` prints: the pinned run id, or None."""

    suite: str
    subject: str
    pinned: str | None


SuiteQuery = Annotated[Identifier, Query(description="Suite name.")]
SubjectQuery = Annotated[str, Query(description="KIND:ID")]
VariantQuery = Annotated[Identifier | None, Query(description="Subject variant.")]


def _subject(store: EvidenceStore, suite: str, subject: str, variant: str | None) -> Subject:
    name, version = registry.parse_ref(suite)
    if version is not None or registry.latest_version(store, name) is None:
        raise NotFoundError(f"suite {suite!r} was never published in {store.uri}")
    who = subject_param(subject)
    return who.model_copy(update={"variant": variant}) if variant else who


@router.post("/baselines", response_model=PinRecord, status_code=201)
async def pin(body: PinRequest, store: Store, _: Operator) -> PinRecord:
    """Pin a completed run as the baseline of its suite and subject."""
    return await run_in_threadpool(baselines.pin, store, body.run_id)


def _show(store: EvidenceStore, suite: str, subject: str, variant: str | None) -> Pinned:
    who = _subject(store, suite, subject, variant)
    return Pinned(suite=suite, subject=str(who), pinned=baselines.pinned(store, suite, who))


@router.get("/baselines", response_model=Pinned)
async def show(
    store: Store, _: Viewer, suite: SuiteQuery, subject: SubjectQuery, variant: VariantQuery = None
) -> Pinned:
    """The pinned baseline of a suite and subject (`pinned` is null: automatic selection)."""
    return await run_in_threadpool(_show, store, suite, subject, variant)


def _unpin(store: EvidenceStore, suite: str, subject: str, variant: str | None) -> PinRecord:
    return baselines.unpin(store, suite, _subject(store, suite, subject, variant))


@router.delete("/baselines", response_model=PinRecord)
async def unpin(
    store: Store,
    _: Operator,
    suite: SuiteQuery,
    subject: SubjectQuery,
    variant: VariantQuery = None,
) -> PinRecord:
    """Remove the pin (recorded as an `unpin`; automatic selection applies again)."""
    return await run_in_threadpool(_unpin, store, suite, subject, variant)
