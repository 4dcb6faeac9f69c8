"""Scoring a records file into an outcome report: per subject, six dimensions, composite, band.

`score_outcomes` reads the records twice, streamed: once to validate every line (nothing is
spent or written for a bad file), then in batches of `BATCH_RECORDS` to score them. Per batch
and subject the three judged dimensions go through `assay.judge.service.judge_requests` (verdict
cache, FinOps preflight, bounded concurrency, cost ledger — the same path as `llm_judge`), and
the responses are embedded once. Response text lives only in the batch being scored; what is
kept are numbers (scores, trigger counts, durations) and, until the consistency step, the
embedding vectors in memory. The report holds per-subject aggregates and counts; neither
vectors nor centroids nor any text are stored.

Layout in the evidence store: `outcomes/<report_id>.json` (write-once; a retried task finds
the first report and returns it).
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from pydantic import BaseModel

from assay.errors import AssayError, NotFoundError
from assay.finops.budget import Decision
from assay.hashing import OutputHasher, store_secret
from assay.judge.port import JudgePin
from assay.judge.service import JudgeSetup, judge_requests
from assay.outcome.composite import DimensionScore, SubjectOutcome, subject_outcome
from assay.outcome.contract import DIMENSIONS, JUDGED, Contract, Dimension
from assay.outcome.dimensions import (
    NO_LATENCY_TARGET,
    consistency,
    efficiency,
    judge_request,
    safety,
)
from assay.outcome.records import OutcomeRecord, check_records, read_records
from assay.store import EvidenceStore
from assay.store.write_once import write_once

if TYPE_CHECKING:
    from assay.outcome.dimensions import Vector

if TYPE_CHECKING:
    from assay.judge.embeddings import Embedder

logger = logging.getLogger(__name__)

BATCH_RECORDS: Final = 64
"""Records scored together: one preflight and one ledger record per batch and subject."""
_REPORT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class OutcomeReport(BaseModel):
    """What scoring a records file found (no text: numbers, counts, reasons and settings).

    Attributes:
        report_id: Names the report, its ledger records and its findings (the flow run id).
        records: The records reference (path or URI) that was scored.
        contract: The contract file, or None for the defaults.
        settings: The contract in effect (weights, latency target, rubrics, bands, …).
        judge: The judge's model pin and prompt version; None when no judge was configured.
        embedding_model: The embedding model; None when none was configured.
        subjects: One outcome per subject, in order of first appearance.
        unavailable: Per dimension, how many records could not be scored, by reason.
        judge_calls: Judge requests sent (cache hits excluded).
        judge_cache_hits: Verdicts answered by the cache.
        judge_cost_usd: What the judge calls cost, as priced into the ledger.
        budget: The most restrictive preflight decision met (None when nothing needed one).
        occurred_at: When the records were scored.
    """

    report_id: str
    records: str
    contract: str | None
    settings: Contract
    judge: JudgePin | None
    embedding_model: str | None
    subjects: list[SubjectOutcome]
    unavailable: dict[Dimension, dict[str, int]]
    judge_calls: int
    judge_cache_hits: int
    judge_cost_usd: float
    budget: Decision | None
    occurred_at: datetime


def report_key(report_id: str) -> str:
    """Where a report lives in the evidence store."""
    return f"outcomes/{report_id}.json"


def load_report(store: EvidenceStore, report_id: str) -> OutcomeReport:
    """A recorded outcome report.

    Raises:
        NotFoundError: No report with that id.
    """
    key = report_key(report_id)
    if not store.exists(key):
        raise NotFoundError(f"no outcome report {report_id!r}")
    return OutcomeReport.model_validate_json(store.get(key))


@dataclass
class _Tally:
    """One subject's numbers while its records stream past (never text)."""

    invocations: int = 0
    triggers: int = 0
    values: dict[Dimension, list[float]] = field(
        default_factory=lambda: {dimension: [] for dimension in DIMENSIONS}
    )


@dataclass
class _Scoring:
    """Everything a scoring pass accumulates across batches."""

    tallies: dict[str, _Tally] = field(default_factory=dict)
    unavailable: dict[Dimension, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))
    embedded: list[tuple[str, str, Vector]] = field(default_factory=list)
    """(subject, query class, embedding) of each embedded response, in memory only."""
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    budget: Decision | None = None
    chunk: int = 0

    def note_budget(self, decision: Decision | None) -> None:
        """Keep the first decision that stopped or alerted, else the latest one."""
        if decision is None:
            return
        if self.budget is None or self.budget.status in ("allowed", "no_budget"):
            self.budget = decision


def _batches(records: Iterable[OutcomeRecord], size: int) -> Iterator[list[OutcomeRecord]]:
    batch: list[OutcomeRecord] = []
    for record in records:
        batch.append(record)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def score_outcomes(
    store: EvidenceStore,
    records: str,
    contract: Contract,
    setup: JudgeSetup,
    embedder: Embedder | None,
    *,
    report_id: str,
    contract_path: str | None = None,
    no_embedder_reason: str = "no embedding model configured",
    now: datetime | None = None,
) -> OutcomeReport:
    """Score every subject in a records file and write the report once (module docstring).

    Args:
        store: The evidence store (verdict cache, ledger, HMAC secret, the report).
        records: Path or URI of the records (a JSONL file or a folder of them).
        contract: The contract in effect (`load_contract`).
        setup: How to judge (`blocks.judge_settings.judge_setup`); with no judge the judged
            dimensions are unavailable with its reason.
        embedder: The embedder for consistency; None makes consistency unavailable.
        report_id: Names the report, its ledger records and its findings.
        contract_path: The contract file, recorded in the report.
        no_embedder_reason: Why there is no embedder, counted under `unavailable`.
        now: When the scoring happens (ledger dates, budget periods); default now.

    Returns:
        The report; when one with this id is already recorded, that first one.

    Raises:
        InputError: A malformed record, a duplicate invocation id, or no records.
        AssayError: An unusable report id.
    """
    if not _REPORT_ID.fullmatch(report_id):
        raise AssayError(f"report id {report_id!r} must be a slug-like identifier")
    key = report_key(report_id)
    if store.exists(key):
        return load_report(store, report_id)
    check_records(records)
    at = (now or datetime.now(UTC)).astimezone(UTC)
    hasher = OutputHasher(store_secret(store))
    scoring = _Scoring()
    for batch in _batches(read_records(records), BATCH_RECORDS):
        _score_batch(store, batch, contract, setup, embedder, hasher, scoring, report_id, at)
    if embedder is None:
        total = sum(tally.invocations for tally in scoring.tallies.values())
        scoring.unavailable["consistency"][no_embedder_reason] += total
    _score_consistency(scoring)
    report = OutcomeReport(
        report_id=report_id,
        records=records,
        contract=contract_path,
        settings=contract,
        judge=setup.pin if setup.model and setup.prompt_version else None,
        embedding_model=None if embedder is None else embedder.model,
        subjects=[_subject(subject, tally, contract) for subject, tally in scoring.tallies.items()],
        unavailable={
            dimension: dict(sorted(scoring.unavailable[dimension].items()))
            for dimension in DIMENSIONS
            if scoring.unavailable[dimension]
        },
        judge_calls=scoring.calls,
        judge_cache_hits=scoring.cache_hits,
        judge_cost_usd=scoring.cost_usd,
        budget=scoring.budget,
        occurred_at=at,
    )
    logger.info(
        "outcome report %s: %d subject(s), %d judge call(s), %d cache hit(s)",
        report_id,
        len(report.subjects),
        report.judge_calls,
        report.judge_cache_hits,
    )
    return write_once(store, key, report)


def _score_batch(
    store: EvidenceStore,
    batch: list[OutcomeRecord],
    contract: Contract,
    setup: JudgeSetup,
    embedder: Embedder | None,
    hasher: OutputHasher,
    scoring: _Scoring,
    report_id: str,
    at: datetime,
) -> None:
    """Judge, time and embed one batch; only numbers survive it."""
    by_subject: dict[str, list[OutcomeRecord]] = defaultdict(list)
    for record in batch:
        by_subject[record.subject].append(record)
        tally = scoring.tallies.setdefault(record.subject, _Tally())
        tally.invocations += 1
        tally.triggers += record.guardrail_triggers
        if contract.latency_target_ms is None:
            scoring.unavailable["efficiency"][NO_LATENCY_TARGET] += 1
        else:
            tally.values["efficiency"].append(
                efficiency(record.duration_ms, contract.latency_target_ms)
            )
    for subject, records in by_subject.items():
        asked = [(record, dimension) for record in records for dimension in JUDGED]
        judged = judge_requests(
            store,
            setup,
            [
                judge_request(r, d, contract, hasher, setup.model, setup.prompt_version)
                for r, d in asked
            ],
            run_id=report_id,
            chunk=scoring.chunk,
            suite="",
            subject=subject,
            now=at,
        )
        scoring.chunk += 1
        scoring.calls += judged.calls
        scoring.cache_hits += judged.cache_hits
        scoring.cost_usd += judged.cost_usd
        scoring.note_budget(judged.decision)
        for (_, dimension), verdict in zip(asked, judged.verdicts, strict=True):
            if verdict.status == "skipped":
                scoring.unavailable[dimension][verdict.reason] += 1
            else:
                scoring.tallies[subject].values[dimension].append(verdict.score)
    if embedder is None:
        return
    embeddings = embedder.embed([record.response for record in batch])
    if embeddings.vectors is None:
        scoring.unavailable["consistency"][embeddings.reason or "embeddings unavailable"] += len(
            batch
        )
        return
    import numpy as np  # only when there are embeddings: keeps `import assay.cli` lean

    for record, vector in zip(batch, embeddings.vectors, strict=True):
        scoring.embedded.append(
            (record.subject, record.query_class, np.asarray(vector, dtype=np.float64))
        )


def _score_consistency(scoring: _Scoring) -> None:
    """Cosine to the class centroid (over the whole input) for every embedded response."""
    if not scoring.embedded:
        return
    subjects, classes, vectors = zip(*scoring.embedded, strict=True)
    scores, reasons = consistency(classes, vectors)
    for subject, score, reason in zip(subjects, scores, reasons, strict=True):
        if score is None:
            scoring.unavailable["consistency"][reason or "unavailable"] += 1
        else:
            scoring.tallies[subject].values["consistency"].append(score)
    scoring.embedded.clear()


def _subject(subject: str, tally: _Tally, contract: Contract) -> SubjectOutcome:
    dimensions = {dimension: DimensionScore.of(tally.values[dimension]) for dimension in DIMENSIONS}
    dimensions["safety"] = DimensionScore(
        mean=safety(tally.triggers, tally.invocations), n=tally.invocations
    )
    return subject_outcome(subject, tally.invocations, dimensions, contract)
