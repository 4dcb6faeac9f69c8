"""A run's cost plan: what it would ask its judge and spend, before anything is spent.

`plan_run` reads what the run would read — the suite, the outputs (indexed and cut into the
run's chunks), the verdict cache, the cost ledger and the live reservations — and writes nothing
and calls no judge. Each chunk's judged checks and their cache keys come from the function the
run judges them with (`assay.runs.judging.chunk_questions`), their repeats from the service's
(`with_repeats`), the cache's answer from its rule (`answered_by_cache`), and the projection from
the preflight's (`projected_tokens`, `price`). So:

- **calls** are exact: the judge calls a run started now would make — every judged check of
  every output (each trial its own) times the judge's repeats, times its jurors (a jury's
  questions per juror, under each juror's cache keys: `assay.judge.jury.juror_questions`), less
  what the cache answers. Checks whose record cannot show what they judge are `unavailable` and
  never asked; judged checks *per turn* of a conversation are unavailable today (never asked); a
  conversation-level check (`llm_judge {on: conversation}`) is one call. Two outputs with the
  same cache key in different chunks count twice (chunks judge side by side: both miss);
- **cost** is an upper bound (while the judge honours `max_tokens`): every call priced as the
  preflight prices it — its text at four characters a token plus the prompt's overhead, and an
  answer at its `max_output_tokens` cap — at each juror's synchronous prices and at the batch
  API's (`Prices.batch`);
- **budgets**: each applicable budget's headroom (limit less the period's recorded spend and
  other batches' live reservations, `assay.finops.budget.assess`), and whether the run would be
  stopped: the synchronous projection past a `block` or `throttle` budget's headroom, or budgets
  that cannot be read (fail closed).
"""

from __future__ import annotations

import os
import secrets
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from assay.finops.budget import Budget, assess
from assay.finops.ledger import scope_matches
from assay.finops.pricing import price
from assay.hashing import SECRET_ENV, SECRET_KEY, OutputHasher, store_secret
from assay.judge.jury import juror_questions, jurors_of
from assay.judge.service import (
    JudgeSetup,
    answered_by_cache,
    judged_characters,
    projected_tokens,
    with_repeats,
)
from assay.outputs.slices import read_slice
from assay.runs.judging import chunk_questions, suite_judge_setup
from assay.runs.options import RunOptions
from assay.runs.sampling import index_run_outputs, select_cases
from assay.runs.scoring import CompiledSuite
from assay.store import EvidenceStore
from assay.subject import Subject
from assay.suites import registry
from assay.suites.suite import Suite, load_suite


class PlannedTokens(BaseModel):
    """Tokens the planned calls are priced for."""

    model_config = ConfigDict(frozen=True)

    input: int
    output: int


class PlannedCost(BaseModel):
    """The planned calls' cost in USD: at the judge's synchronous prices, and through its
    provider's batch API."""

    model_config = ConfigDict(frozen=True)

    sync: float
    batch: float


class BudgetHeadroom(BaseModel):
    """One budget that applies to the run, and what is left of it."""

    model_config = ConfigDict(frozen=True)

    name: str
    mode: str
    limit_usd: float
    spent_usd: float | None
    """The period's recorded spend in the budget's scope (None: the ledger cannot be read)."""
    reserved_usd: float
    """What other batches' live reservations hold against it."""
    headroom: float | None
    """Limit less spent and reserved (None: the ledger cannot be read)."""
    blocked: bool
    """Whether the planned spend would be stopped by this budget."""


class CostPlan(BaseModel):
    """What a run would ask its judge and spend (no text; nothing was called or written)."""

    model_config = ConfigDict(frozen=True)

    suite: str
    subject: str
    judge: str | None
    """The judge model asked; None when no judge would be asked (`not_judged` says why)."""
    not_judged: str | None = None
    outputs: int
    """Outputs read (each trial of a case its own output)."""
    checks: int
    """Judged checks asked (each repeat and juror counted in `calls`, not here)."""
    unavailable: int
    """Judged checks their records cannot answer: never asked, against coverage."""
    repeats: int
    jurors: int = 1
    calls: int
    cache_hits: int
    tokens: PlannedTokens
    cost_usd: PlannedCost
    budgets: list[BudgetHeadroom]
    blocked: bool
    """Whether the budgets would stop the run's judge spending (or refuse it)."""
    reason: str | None = None
    """The deciding budget's reason (the preflight's words), when one applies."""


def plan_run(
    store: EvidenceStore,
    options: RunOptions,
    setup: JudgeSetup,
    *,
    suite_files: bool = True,
    now: datetime | None = None,
) -> CostPlan:
    """The cost plan of a run of `options` judged as `setup` says (see the module docstring).

    Args:
        store: The run's evidence store: read (verdict cache, ledger, reservations), never written.
        options: The run's options (suite, outputs, sample, chunk size, fresh judge, …).
        setup: How the run would judge (`blocks.judge_settings.judge_setup`, budgets included).
        suite_files: Whether the suite may be a file (read, not published); False for the service.
        now: The moment that picks the budgets' periods; default now.
    """
    suite = _suite(store, options.suite, suite_files)
    subject = str(Subject.given_or_default(options.subject, options.outputs))
    index = index_run_outputs(
        suite, options.outputs, options.sample, options.seed, options.chunk_size
    )
    compiled = CompiledSuite.compile(suite)
    setup = suite_judge_setup(setup, suite)
    selected = frozenset(
        select_cases([case.id for case in suite.cases], options.sample, options.seed)
    )
    hasher = _hasher(store)
    outputs = checks = unavailable = cache_hits = 0
    jurors = jurors_of(setup)
    lengths: list[list[int]] = [[] for _ in jurors]
    for piece in index.slices:
        chunk = list(read_slice(piece, selected))
        outputs += len(chunk)
        if not compiled.judged:
            continue
        asked = chunk_questions(compiled, chunk, hasher, setup)
        checks += len(asked.requests)
        unavailable += len(asked.unjudged)
        if setup.make_judge is None:  # every check skipped with the reason: nothing asked
            continue
        repeated = with_repeats(asked.requests, setup.repeats)
        for juror, (judge, questions) in enumerate(juror_questions(setup, repeated)):
            for key, request in questions:
                if answered_by_cache(store, judge, key):
                    cache_hits += 1
                else:
                    lengths[juror].append(judged_characters(request))
    calls = sum(len(reads) for reads in lengths)
    input_tokens = output_tokens = 0
    sync = batch = 0.0
    for judge, reads in zip(jurors, lengths, strict=True):
        tokens = projected_tokens(judge, reads) if reads else (0, 0)
        input_tokens, output_tokens = input_tokens + tokens[0], output_tokens + tokens[1]
        sync += price(judge.prices, *tokens)
        batch += price(judge.prices.batch(), *tokens)
    at = now or datetime.now(UTC)
    budgets, blocked, reason = _budgets(
        store, setup.applicable_budgets(), sync, suite.suite, subject, at
    )
    judged = compiled.judged and setup.make_judge is not None
    return CostPlan(
        suite=suite.suite,
        subject=subject,
        judge=setup.model if judged else None,
        not_judged=None if judged or not compiled.judged else setup.skip_reason,
        outputs=outputs,
        checks=checks,
        unavailable=unavailable,
        repeats=setup.repeats,
        jurors=len(jurors),
        calls=calls,
        cache_hits=cache_hits,
        tokens=PlannedTokens(input=input_tokens, output=output_tokens),
        cost_usd=PlannedCost(sync=sync, batch=batch),
        budgets=budgets,
        blocked=blocked,
        reason=reason,
    )


def _suite(store: EvidenceStore, ref: str, suite_files: bool) -> Suite:
    """The suite a run of `ref` would score: a file read as it is (a run publishes it first,
    the same cases), else the published version."""
    if suite_files and Path(ref).is_file():
        return load_suite(ref)
    return registry.resolve(store, ref)[1]


def _hasher(store: EvidenceStore) -> OutputHasher:
    """The store's keyed hash, read and never created: a store without its secret yet has no
    verdict cached under one, so any secret finds none (every question is a miss)."""
    if os.environ.get(SECRET_ENV) or store.exists(SECRET_KEY):
        return OutputHasher(store_secret(store))
    return OutputHasher(secrets.token_bytes(32))


def _budgets(
    store: EvidenceStore,
    budgets: list[Budget] | None,
    projected: float,
    suite: str,
    subject: str,
    now: datetime,
) -> tuple[list[BudgetHeadroom], bool, str | None]:
    """Each applicable budget's headroom and whether the projection would be stopped, by the
    preflight's own rule (`assess`, which reads the ledger and the reservations only)."""
    decision = assess(store, budgets, projected, suite, subject, now)[0]
    rows = []
    for budget in budgets or []:
        if not scope_matches(budget.scope, suite, subject):
            continue
        alone = assess(store, [budget], projected, suite, subject, now)[0]
        spent = alone.spent_usd
        reserved = alone.reserved_usd or 0.0
        rows.append(
            BudgetHeadroom(
                name=budget.name,
                mode=budget.mode,
                limit_usd=budget.limit_usd,
                spent_usd=spent,
                reserved_usd=reserved,
                headroom=None if spent is None else budget.limit_usd - spent - reserved,
                blocked=not alone.allowed,
            )
        )
    applies = decision.status != "no_budget"
    return rows, not decision.allowed, decision.reason if applies else None
