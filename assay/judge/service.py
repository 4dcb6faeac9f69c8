"""Judging a chunk: the verdict cache, the FinOps preflight, bounded concurrent calls, costs.

Runs inside one scoring task, so candidate output text never leaves that task's memory. Steps
(`judge_requests` does 2-4 for any batch of requests; `judge_chunk` feeds it a suite chunk):
1. every `llm_judge` check of the chunk becomes a `JudgeRequest`;
2. the verdict cache (keyed by case content, keyed output hash, rubric, threshold, model pin and
   prompt version) answers what it can — a hit costs nothing (`fresh` bypasses it);
3. the preflight prices what is left and checks the applicable budgets: `blocked`, `throttled`
   or `refused` stops the spending and the checks are skipped (`budget_blocked`), never passed;
4. the rest is judged with bounded concurrency; pass/fail verdicts are cached (write-once) and
   the tokens priced into the cost ledger.
With no judge configured, every `llm_judge` check is skipped with the reason (fail closed).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from assay.canonical import content_hash
from assay.finops.budget import Budget, Decision, preflight
from assay.finops.ledger import CostRecord
from assay.finops.ledger import record_cost as write_cost
from assay.finops.pricing import Prices, estimate_tokens, price
from assay.hashing import OutputHasher
from assay.judge.port import BUDGET_BLOCKED, Judge, JudgeRequest, Verdict, judge_all
from assay.judge.redaction import NO_REDACTION, RedactionSettings, add_counts
from assay.outputs import CandidateOutput
from assay.runs.scoring import CompiledSuite
from assay.scorers import Outcome, Status
from assay.scorers.judge import LlmJudgeConfig
from assay.store import EvidenceStore

T = TypeVar("T")
FREE = Prices(input_per_million=0, output_per_million=0)
CACHE_WRITERS = 4
"""Threads writing verdict-cache records while judge calls are in flight."""
CheckKey = tuple[str, int]
"""(case id, position of the check among the case's scorers)."""


@dataclass
class JudgeSetup:
    """How this run judges: which judge (or why none), concurrency, prices, budgets."""

    make_judge: Callable[[], Judge] | None
    """Builds the judge inside the chunk's event loop; None when no judge is configured."""
    skip_reason: str
    """Why checks are skipped when `make_judge` is None (`no judge configured`, …)."""
    model: str | None = None
    prompt_version: str | None = None
    max_concurrency: int = 4
    prices: Prices = field(
        default_factory=lambda: Prices(input_per_million=0, output_per_million=0)
    )
    budgets: list[Budget] | None = field(default_factory=list)
    """Applicable budgets; None when they could not be read (spending is then refused)."""
    fresh: bool = False
    redaction: RedactionSettings = NO_REDACTION
    """What the judge redacts before each call (already part of `prompt_version`)."""


NO_JUDGE_NEEDED = JudgeSetup(None, "no judge configured")
"""For suites without `llm_judge` checks: nothing to configure, nothing to read."""


@dataclass
class ChunkJudgement:
    """What judging one chunk produced (no text)."""

    outcomes: dict[CheckKey, Outcome]
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    decision: Decision | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    """Redactions per kind in the judge prompts behind these verdicts (counts only)."""


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _outcome(verdict: Verdict) -> Outcome:
    if verdict.status == "skipped":
        return Outcome(Status.SKIPPED, 0.0, verdict.reason)
    return Outcome(Status.PASS if verdict.status == "pass" else Status.FAIL, verdict.score, "")


def _cache_key(case_hash: str, output_hmac: str, config: LlmJudgeConfig, setup: JudgeSetup) -> str:
    digest = content_hash(
        {
            "case": case_hash,
            "output": output_hmac,
            "rubric": config.rubric,
            "threshold": config.pass_threshold,
            "model": setup.model,
            "prompt": setup.prompt_version,
        }
    ).removeprefix("sha256:")
    return f"judge-cache/{digest[:2]}/{digest}.json"


async def _judge(
    setup: JudgeSetup,
    requests: Sequence[JudgeRequest],
    on_verdict: Callable[[int, Verdict], None] | None = None,
) -> list[Verdict]:
    assert setup.make_judge is not None
    judge = setup.make_judge()
    try:
        return await judge_all(judge, requests, setup.max_concurrency, on_verdict)
    finally:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


@dataclass
class Judged:
    """What judging a batch of requests produced: one verdict per request, in order (no text)."""

    verdicts: list[Verdict]
    calls: int = 0
    cache_hits: int = 0
    cost_usd: float = 0.0
    decision: Decision | None = None
    redactions: dict[str, int] = field(default_factory=dict)
    """Redactions per kind in the judge prompts behind these verdicts (counts only)."""


def judge_requests(
    store: EvidenceStore,
    setup: JudgeSetup,
    requests: Sequence[tuple[str, JudgeRequest]],
    *,
    run_id: str,
    chunk: int,
    suite: str,
    subject: str,
    now: datetime | None = None,
) -> Judged:
    """Judge a batch of requests through the cache, the preflight, the judge and the ledger.

    Any caller that grades outputs with the judge port goes through here, so every verdict is
    cached, budgeted and priced the same way: suite checks (`judge_chunk`) and the outcome
    score's judged dimensions (`assay.outcome`).

    Args:
        store: The evidence store (verdict cache, cost ledger, budget spend).
        setup: How to judge; with no judge, every verdict is skipped with `setup.skip_reason`.
        requests: `(cache key, request)` pairs; the caller builds the cache key from content
            hashes and keyed output hashes, the rubric, the model pin and the prompt version.
        run_id: Names the batch's cost record (with `chunk`).
        chunk: Numbers the batch within the run: one cost record per run and chunk.
        suite: The suite judged, for budget scopes and the ledger (empty outside a suite).
        subject: The subject judged (`KIND:ID[@VARIANT]`), for budget scopes and the ledger.
        now: When the spend happens (dates the ledger and picks budget periods); default now.

    Returns:
        One verdict per request, in order, with the calls made, cache hits, cost and the
        preflight decision (None when nothing needed judging).
    """
    if setup.make_judge is None:
        return Judged([Verdict.skipped(setup.skip_reason)] * len(requests))
    verdicts: list[Verdict | None] = [None] * len(requests)
    judged = Judged(verdicts=[])
    pending: list[tuple[int, str, JudgeRequest]] = []
    for index, (cache_key, request) in enumerate(requests):
        if not setup.fresh and store.exists(cache_key):
            verdicts[index] = Verdict.model_validate_json(store.get(cache_key))
            judged.cache_hits += 1
        else:
            pending.append((index, cache_key, request))
    if pending:
        _spend(store, setup, pending, verdicts, judged, run_id, chunk, suite, subject, now)
    judged.verdicts = [verdict for verdict in verdicts if verdict is not None]
    for verdict in judged.verdicts:
        judged.redactions = add_counts(judged.redactions, verdict.redactions)
    return judged


def _spend(
    store: EvidenceStore,
    setup: JudgeSetup,
    pending: list[tuple[int, str, JudgeRequest]],
    verdicts: list[Verdict | None],
    judged: Judged,
    run_id: str,
    chunk: int,
    suite: str,
    subject: str,
    now: datetime | None,
) -> None:
    """Preflight, then judge what the cache did not answer; cache and price the verdicts."""
    requests = [request for _, _, request in pending]
    tokens_in, tokens_out = estimate_tokens(
        [len(r.input) + len(r.expected or "") + len(r.rubric) + len(r.output) for r in requests]
    )
    projected = price(setup.prices, tokens_in, tokens_out)
    judged.decision = preflight(store, setup.budgets, projected, suite, subject, now)
    if not judged.decision.allowed:
        for index, _, _ in pending:
            verdicts[index] = Verdict.skipped(BUDGET_BLOCKED)
        return

    # Each verdict is cached as it arrives, on writer threads, while other calls are in flight:
    # a paid-for verdict is kept even if a later call fails, and neither the writes' latency
    # (fsync, or an S3 round trip) nor their I/O blocks the event loop that drives the calls.
    with concurrent.futures.ThreadPoolExecutor(CACHE_WRITERS) as writers:
        writes: list[concurrent.futures.Future[bool]] = []

        def cache(position: int, verdict: Verdict) -> None:
            if verdict.status != "skipped":
                data = verdict.model_dump_json().encode()
                writes.append(writers.submit(store.put_once_if_absent, pending[position][1], data))

        answers = run_sync(_judge(setup, requests, cache))
        for write in writes:
            write.result()  # a failed cache write fails the task, which is retried
    used_in = used_out = 0
    for (index, _, _), verdict in zip(pending, answers, strict=True):
        verdicts[index] = verdict
        used_in += verdict.input_tokens
        used_out += verdict.output_tokens
    judged.calls = len(requests)
    judged.cost_usd = price(setup.prices, used_in, used_out)
    # One ledger record per run and chunk (first writer wins): a retried chunk finds its
    # verdicts in the cache and spends, and records, only what the first attempt did not.
    write_cost(
        store,
        CostRecord(
            run_id=run_id,
            chunk=chunk,
            suite=suite,
            subject=subject,
            model=setup.model or "",
            prompt_version=setup.prompt_version or "",
            calls=judged.calls,
            input_tokens=used_in,
            output_tokens=used_out,
            cost_usd=judged.cost_usd,
            at=now or datetime.now(UTC),
        ),
    )


def judge_chunk(
    store: EvidenceStore,
    compiled: CompiledSuite,
    outputs: Sequence[CandidateOutput],
    hasher: OutputHasher,
    setup: JudgeSetup,
    *,
    run_id: str,
    chunk: int,
    subject: str,
    now: datetime | None = None,
) -> ChunkJudgement:
    """Judge every `llm_judge` check of one chunk's outputs (see the module docstring)."""
    suite = compiled.suite
    keys: list[CheckKey] = []
    requests: list[tuple[str, JudgeRequest]] = []
    for output in outputs:
        case = compiled.cases[output.case_id]
        for position, spec in enumerate(suite.scorers_for(case)):
            if not isinstance(spec.config, LlmJudgeConfig):
                continue
            keys.append((case.id, position))
            requests.append(
                (
                    _cache_key(case.content_hash, hasher(output.output), spec.config, setup),
                    JudgeRequest(
                        case_id=case.id,
                        input=case.input,
                        expected=case.expected,
                        rubric=spec.config.rubric,
                        output=output.output,
                        pass_threshold=spec.config.pass_threshold,
                    ),
                )
            )
    if not requests:
        return ChunkJudgement(outcomes={})
    batch = judge_requests(
        store,
        setup,
        requests,
        suite=suite.suite,
        subject=subject,
        run_id=run_id,
        chunk=chunk,
        now=now,
    )
    return ChunkJudgement(
        outcomes={key: _outcome(v) for key, v in zip(keys, batch.verdicts, strict=True)},
        calls=batch.calls,
        cache_hits=batch.cache_hits,
        cost_usd=batch.cost_usd,
        decision=batch.decision,
        redactions=batch.redactions,
    )
