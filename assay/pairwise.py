"""Pairwise A/B comparison (SPEC §8): which of two output sets a judge prefers, honestly counted.

For every case of a suite that both output sets answer and that has an `llm_judge` rubric (the
case's first one), the judge compares the two outputs **twice**: A shown first and B second, then
B first and A second. Each answer names a position, which is mapped back to A or B. A winner is
declared only when both orders agree (A,A → A wins; B,B → B wins; tie,tie → tie); a pair whose
orders disagree is `inconsistent` — counted as a tie in the win rates and reported apart, since
it is what position bias looks like. A pair with a skipped order (no judge, judge unavailable,
malformed reply, budget stop) is `unjudged`: counted, excluded from every denominator, never a
win.

Measured, with 95% Wilson intervals over the judged pairs:
- `win_rate_a` = wins A / judged pairs, `win_rate_b` likewise;
- `position_consistency` = consistent pairs (both orders agree) / judged pairs.

Like `assay.judging` for single verdicts, spending is cached, budgeted and priced:
- the verdict cache is keyed by case content, the keyed hashes (HMAC) of *both* outputs **in
  presentation order**, the rubric, the model pin and the pairwise prompt version: the two orders
  of one case are two entries, and a hit costs nothing (`fresh` bypasses it); write-once;
- the FinOps preflight prices the calls left after the cache before any is made; a stop
  (`blocked`, `throttled`, `refused`) leaves every pending pair unjudged with `budget_blocked`,
  makes no call and records a `budget_blocked` finding under the comparison id;
- every batch's token usage is priced into the cost ledger (`run_id` = the comparison id).

When A and B gave the same output for a case, both orders show the same two texts and share
one cache entry: a judge that names a position there is measured as inconsistent, as it is.

Minimal data (SPEC §1.4): output texts live only in this function's memory (both sides' texts
for the compared cases, read by byte range from the outputs references). The cache holds
positions and counts, the judge's reasoning is discarded by the adapter, and the report —
written once as `comparisons/<comparison_id>.json` — holds counts, rates and references only.

Nothing here imports Prefect.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Final, Literal

from pydantic import AwareDatetime, BaseModel, Field

from assay.budget import CostRecord, Decision, estimate_tokens, preflight, price, record_cost
from assay.canonical import content_hash
from assay.errors import AssayError, shown
from assay.findings import budget_finding
from assay.findings import record as record_finding
from assay.hashing import OutputHasher, store_secret
from assay.judge.port import (
    BUDGET_BLOCKED,
    PairJudge,
    PairRequest,
    PairVerdict,
    Winner,
    judge_pairs_all,
)
from assay.judge.prompts import load_prompt
from assay.judging import JudgeSetup, run_sync
from assay.outputs import index_outputs, read_slice
from assay.registry import SuiteVersion
from assay.scorers.judge import LlmJudgeConfig
from assay.stats import wilson
from assay.store import EvidenceStore
from assay.suites import Case, Suite

logger = logging.getLogger(__name__)


PAIRWISE_PROMPT: Final = "pairwise"
"""The prompt template pairwise verdicts use (`assay/judge/prompts/pairwise.txt`)."""
CACHE_PREFIX: Final = "judge-cache/pairwise/"
REPORT_PREFIX: Final = "comparisons/"
BATCH_REQUESTS: Final = 1000
"""Judge calls per batch: verdicts are cached and the ledger written after each batch, so an
interrupted comparison keeps (and has recorded) what it already paid for."""
READ_CHUNK: Final = 2000
"""Outputs per slice when reading an outputs reference."""

Order = Literal["ab", "ba"]
"""Presentation order: `ab` shows A first and B second, `ba` the other way round."""
ORDERS: Final[tuple[Order, ...]] = ("ab", "ba")
PairOutcome = Literal["a", "b", "tie", "inconsistent", "unjudged"]

_COMPARISON_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_SUBJECT_PART = re.compile(r"[^A-Za-z0-9._-]+")


class PairwiseError(AssayError):
    """The comparison cannot run as configured (retrying does not help)."""


# --- the report -------------------------------------------------------------------------------


class WinRate(BaseModel):
    """Wins of one side over the judged pairs, with its 95% Wilson interval (None when n = 0)."""

    rate: float | None
    lo: float | None
    hi: float | None
    wins: int
    n: int
    """Judged pairs: the denominator."""


class PositionConsistency(BaseModel):
    """Pairs whose two orders agreed, over the judged pairs, with its 95% Wilson interval."""

    rate: float | None
    lo: float | None
    hi: float | None
    consistent: int
    judged: int


class JudgePin(BaseModel):
    """The judge the verdicts came from (None when no judge was configured)."""

    model: str | None
    prompt_version: str | None


class PairwiseReport(BaseModel):
    """The outcome of one pairwise comparison: counts, rates and references — never text.

    Counts: `cases_compared` pairs were put to the judge (shared cases with a rubric);
    `unjudged` of them got no verdict in at least one order; the `judged` rest split into
    `wins_a + wins_b + ties + inconsistent`. Cases not compared are counted apart:
    `without_rubric` (no `llm_judge` check), `missing_a` / `missing_b` (a rubric but no output
    on that side; a case missing on both sides counts in both).
    """

    comparison_id: str
    suite: str
    suite_version: int
    label_a: str
    label_b: str
    outputs_a: str
    outputs_b: str
    subject: str
    """The budget and ledger subject of this comparison (`comparison:<A>-vs-<B>`)."""
    cases: int
    """Cases in the suite version."""
    without_rubric: int
    missing_a: int
    missing_b: int
    cases_compared: int
    judged: int
    unjudged: int
    unjudged_reasons: dict[str, int] = Field(default_factory=dict)
    """Why pairs were unjudged (the judge's skip vocabulary), with counts."""
    wins_a: int
    wins_b: int
    ties: int
    """Pairs where both orders answered tie."""
    inconsistent: int
    """Pairs whose two orders disagreed (position bias); a tie in the win rates."""
    win_rate_a: WinRate
    win_rate_b: WinRate
    position_consistency: PositionConsistency
    judge: JudgePin
    calls: int
    """Judge calls made (one per order not found in the cache)."""
    cache_hits: int
    """Order verdicts answered by the cache."""
    cost_usd: float
    budget: Decision | None = None
    """The FinOps preflight's decision, when there were calls to make."""
    occurred_at: AwareDatetime


def report_key(comparison_id: str) -> str:
    """Where a comparison's report is kept: `comparisons/<comparison_id>.json`."""
    return f"{REPORT_PREFIX}{comparison_id}.json"


def load_report(store: EvidenceStore, comparison_id: str) -> PairwiseReport:
    """A recorded comparison (raises `NotFoundError` when there is none)."""
    return PairwiseReport.model_validate_json(store.get(report_key(comparison_id)))


# --- pure parts -------------------------------------------------------------------------------


def comparison_subject(label_a: str, label_b: str) -> str:
    """The subject budgets and the ledger see for a comparison: `comparison:<A>-vs-<B>`.

    Labels are reduced to letters, digits, `.`, `_` and `-` so the subject is a valid
    `KIND:ID` (budgets can scope it as `subject:comparison:<A>-vs-<B>`).
    """

    def part(label: str) -> str:
        return _SUBJECT_PART.sub("-", label).strip("-") or "x"

    return f"comparison:{part(label_a)}-vs-{part(label_b)}"


def judged_rubric(suite: Suite, case: Case) -> LlmJudgeConfig | None:
    """The case's first `llm_judge` check, which pairwise comparison uses; None when it has none."""
    for spec in suite.scorers_for(case):
        if isinstance(spec.config, LlmJudgeConfig):
            return spec.config
    return None


def side_of(winner: Winner, order: Order) -> Literal["a", "b", "tie"]:
    """Map a positional winner back to the side it named in that presentation order."""
    if winner == "tie":
        return "tie"
    shown_first_is_a = order == "ab"
    if winner == "first":
        return "a" if shown_first_is_a else "b"
    return "b" if shown_first_is_a else "a"


def pair_outcome(ab: PairVerdict, ba: PairVerdict) -> PairOutcome:
    """One case's outcome from its two orders: a side or a tie when both agree, `inconsistent`
    when they disagree, `unjudged` when either order was skipped."""
    if ab.winner is None or ba.winner is None or "skipped" in (ab.status, ba.status):
        return "unjudged"
    first, second = side_of(ab.winner, "ab"), side_of(ba.winner, "ba")
    return first if first == second else "inconsistent"


def _win_rate(wins: int, judged: int) -> WinRate:
    interval = wilson(wins, judged)
    return WinRate(
        rate=wins / judged if judged else None,
        lo=interval.lo if interval else None,
        hi=interval.hi if interval else None,
        wins=wins,
        n=judged,
    )


def _consistency(consistent: int, judged: int) -> PositionConsistency:
    interval = wilson(consistent, judged)
    return PositionConsistency(
        rate=consistent / judged if judged else None,
        lo=interval.lo if interval else None,
        hi=interval.hi if interval else None,
        consistent=consistent,
        judged=judged,
    )


def pairwise_setup(setup: JudgeSetup, prompt: str = PAIRWISE_PROMPT) -> JudgeSetup:
    """A run's judge setup (`tasks.judge.judge_setup`) turned to pairwise judging.

    Everything is kept (judge, concurrency, prices, budgets, fresh) except the prompt version,
    which becomes the pairwise template's: it is what the cache is keyed on and what the
    report records. The adapter uses the same template by default (`OpenAIJudge`'s
    `pairwise_prompt`); verdicts stamped with any other version are never cached.
    """
    if setup.make_judge is None:
        return setup
    return replace(setup, prompt_version=load_prompt(prompt).version)


# --- the comparison ---------------------------------------------------------------------------


@dataclass
class _Pending:
    """One order of one case still to be judged (holds text: memory only)."""

    case_id: str
    order: Order
    cache_key: str
    request: PairRequest


def _cache_key(
    case_hash: str, first_hmac: str, second_hmac: str, rubric: str, setup: JudgeSetup
) -> str:
    digest = content_hash(
        {
            "kind": "pairwise",
            "case": case_hash,
            "first": first_hmac,
            "second": second_hmac,
            "rubric": rubric,
            "model": setup.model,
            "prompt": setup.prompt_version,
        }
    ).removeprefix("sha256:")
    return f"{CACHE_PREFIX}{digest[:2]}/{digest}.json"


def _read_texts(uri: str, known: set[str], selected: list[str]) -> tuple[dict[str, str], int]:
    """The outputs of the selected cases by case id, and how many selected cases have none."""
    index = index_outputs(uri, known, selected, READ_CHUNK)
    wanted = frozenset(selected)
    texts: dict[str, str] = {}
    for piece in index.slices:
        for output in read_slice(piece, wanted):
            texts[output.case_id] = output.output
    return texts, len(index.missing)


async def _judge_batch(setup: JudgeSetup, requests: Sequence[PairRequest]) -> list[PairVerdict]:
    assert setup.make_judge is not None
    judge = setup.make_judge()
    try:
        if not isinstance(judge, PairJudge):
            raise PairwiseError(f"the configured judge ({type(judge).__name__}) cannot compare")
        return await judge_pairs_all(judge, requests, setup.max_concurrency)
    finally:
        close = getattr(judge, "aclose", None)
        if close is not None:
            await close()


def _batches(items: Sequence[_Pending], size: int) -> Iterator[Sequence[_Pending]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def compare_outputs(
    store: EvidenceStore,
    version: SuiteVersion,
    suite: Suite,
    outputs_a: str,
    outputs_b: str,
    setup: JudgeSetup,
    *,
    comparison_id: str,
    label_a: str = "A",
    label_b: str = "B",
    now: datetime | None = None,
) -> PairwiseReport:
    """Compare two sets of outputs for one suite version, pair by pair (see the module docs).

    Args:
        store: The evidence store (cache, ledger, findings, the report).
        version: The published suite version compared on.
        suite: Its content (`registry.resolve`).
        outputs_a: Path or URI of side A's outputs (JSONL file or folder, local or S3).
        outputs_b: Path or URI of side B's outputs.
        setup: How to judge, with the *pairwise* prompt version (`pairwise_setup`).
        comparison_id: Names the report, the ledger records and any finding.
        label_a: How A is named in the report (e.g. `v1`).
        label_b: How B is named in the report.
        now: When the comparison happens (dates the ledger and budget periods); default now.

    Returns:
        The report, also written once to `comparisons/<comparison_id>.json`; when one is
        already there (a retried task), that first report is returned (first writer wins).

    Raises:
        PairwiseError: the comparison id is unusable, or the judge cannot compare pairs.
        InputError: an outputs reference is missing or malformed (naming file and line).
    """
    if not _COMPARISON_ID.fullmatch(comparison_id):
        raise PairwiseError(f"comparison id {shown(comparison_id)} must be a slug-like identifier")
    at = (now or datetime.now(UTC)).astimezone(UTC)
    subject = comparison_subject(label_a, label_b)
    rubrics = {case.id: judged_rubric(suite, case) for case in suite.cases}
    selected = [case.id for case in suite.cases if rubrics[case.id] is not None]
    known = {case.id for case in suite.cases}
    texts_a, missing_a = _read_texts(outputs_a, known, selected)
    texts_b, missing_b = _read_texts(outputs_b, known, selected)
    cases = {case.id: case for case in suite.cases}
    shared = [case_id for case_id in selected if case_id in texts_a and case_id in texts_b]

    verdicts: dict[tuple[str, Order], PairVerdict] = {}
    calls = cache_hits = 0
    cost = 0.0
    decision: Decision | None = None
    if setup.make_judge is None:
        skipped = PairVerdict.skipped(setup.skip_reason)
        verdicts = {(case_id, order): skipped for case_id in shared for order in ORDERS}
    else:
        hasher = OutputHasher(store_secret(store))
        pending: list[_Pending] = []
        for case_id in shared:
            case, config = cases[case_id], rubrics[case_id]
            assert config is not None
            hmac_a, hmac_b = hasher(texts_a[case_id]), hasher(texts_b[case_id])
            for order in ORDERS:
                first, second = (hmac_a, hmac_b) if order == "ab" else (hmac_b, hmac_a)
                key = _cache_key(case.content_hash, first, second, config.rubric, setup)
                if not setup.fresh and store.exists(key):
                    verdicts[(case_id, order)] = PairVerdict.model_validate_json(store.get(key))
                    cache_hits += 1
                    continue
                text_a, text_b = texts_a[case_id], texts_b[case_id]
                request = PairRequest(
                    case_id=case_id,
                    input=case.input,
                    expected=case.expected,
                    rubric=config.rubric,
                    first=text_a if order == "ab" else text_b,
                    second=text_b if order == "ab" else text_a,
                )
                pending.append(_Pending(case_id, order, key, request))
        if pending:
            decision, calls, cost = _spend(
                store, suite, version, setup, pending, verdicts, comparison_id, subject, at
            )

    tally: Counter[PairOutcome] = Counter()
    reasons: Counter[str] = Counter()
    for case_id in shared:
        ab, ba = verdicts[(case_id, "ab")], verdicts[(case_id, "ba")]
        outcome = pair_outcome(ab, ba)
        tally[outcome] += 1
        if outcome == "unjudged":
            reasons[ab.reason if ab.status == "skipped" else ba.reason] += 1
    judged = len(shared) - tally["unjudged"]
    consistent = tally["a"] + tally["b"] + tally["tie"]
    report = PairwiseReport(
        comparison_id=comparison_id,
        suite=version.suite,
        suite_version=version.version,
        label_a=label_a,
        label_b=label_b,
        outputs_a=outputs_a,
        outputs_b=outputs_b,
        subject=subject,
        cases=len(suite.cases),
        without_rubric=len(suite.cases) - len(selected),
        missing_a=missing_a,
        missing_b=missing_b,
        cases_compared=len(shared),
        judged=judged,
        unjudged=tally["unjudged"],
        unjudged_reasons=dict(sorted(reasons.items())),
        wins_a=tally["a"],
        wins_b=tally["b"],
        ties=tally["tie"],
        inconsistent=tally["inconsistent"],
        win_rate_a=_win_rate(tally["a"], judged),
        win_rate_b=_win_rate(tally["b"], judged),
        position_consistency=_consistency(consistent, judged),
        judge=JudgePin(model=setup.model, prompt_version=setup.prompt_version),
        calls=calls,
        cache_hits=cache_hits,
        cost_usd=cost,
        budget=decision,
        occurred_at=at,
    )
    logger.info(
        "comparison %s: %d pairs compared, %d judged, %d unjudged, %d call(s), %d cache hit(s)",
        comparison_id,
        report.cases_compared,
        report.judged,
        report.unjudged,
        report.calls,
        report.cache_hits,
    )
    if store.put_once_if_absent(report_key(comparison_id), report.model_dump_json().encode()):
        return report
    return load_report(store, comparison_id)


def _spend(
    store: EvidenceStore,
    suite: Suite,
    version: SuiteVersion,
    setup: JudgeSetup,
    pending: list[_Pending],
    verdicts: dict[tuple[str, Order], PairVerdict],
    comparison_id: str,
    subject: str,
    at: datetime,
) -> tuple[Decision, int, float]:
    """Preflight, then judge the pending orders in batches: cache, price and record each batch.

    Fills `verdicts`; returns the preflight decision, the calls made and their cost.
    """
    lengths = [
        len(r.input) + len(r.expected or "") + len(r.rubric) + len(r.first) + len(r.second)
        for r in (item.request for item in pending)
    ]
    projected = price(setup.prices, *estimate_tokens(lengths))
    decision = preflight(store, setup.budgets, projected, suite.suite, subject, at)
    finding = budget_finding(decision, comparison_id, version.suite, version.version, subject, at)
    if finding is not None:
        record_finding(store, finding)
    if not decision.allowed:
        blocked = PairVerdict.skipped(
            BUDGET_BLOCKED, model=setup.model, prompt_version=setup.prompt_version
        )
        for item in pending:
            verdicts[(item.case_id, item.order)] = blocked
        return decision, 0, 0.0
    calls = 0
    cost = 0.0
    for number, batch in enumerate(_batches(pending, BATCH_REQUESTS)):
        answers = run_sync(_judge_batch(setup, [item.request for item in batch]))
        used_in = used_out = 0
        for item, verdict in zip(batch, answers, strict=True):
            verdicts[(item.case_id, item.order)] = verdict
            used_in += verdict.input_tokens
            used_out += verdict.output_tokens
            cacheable = (
                verdict.status == "judged"
                and verdict.model == setup.model
                and verdict.prompt_version == setup.prompt_version
            )
            if cacheable:
                store.put_once_if_absent(item.cache_key, verdict.model_dump_json().encode())
        batch_cost = price(setup.prices, used_in, used_out)
        calls += len(batch)
        cost += batch_cost
        # One ledger record per comparison and batch (first writer wins): a retried task finds
        # its verdicts in the cache, and its spend already recorded.
        record_cost(
            store,
            CostRecord(
                run_id=comparison_id,
                chunk=number,
                suite=suite.suite,
                subject=subject,
                model=setup.model or "",
                prompt_version=setup.prompt_version or "",
                calls=len(batch),
                input_tokens=used_in,
                output_tokens=used_out,
                cost_usd=batch_cost,
                at=at,
            ),
        )
    return decision, calls, cost


# --- presentation -----------------------------------------------------------------------------


def _cell(text: str) -> str:
    """A label safe inside a markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def _interval(lo: float | None, hi: float | None) -> str:
    return "n/a" if lo is None or hi is None else f"{lo:.3f}–{hi:.3f}"


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.3f}"


def markdown_report(report: PairwiseReport) -> str:
    """The comparison as a markdown artifact: outcomes with denominators, rates with intervals."""
    a, b = _cell(report.label_a), _cell(report.label_b)
    n = report.judged
    consistency = report.position_consistency
    lines = [
        f"# Pairwise comparison · {report.suite}@{report.suite_version} · {a} vs {b}",
        "",
        "Each shared case with an `llm_judge` rubric is judged twice, with the order swapped; "
        "a winner is declared only when both orders agree.",
        "",
        "| outcome | pairs | of judged pairs |",
        "|---|---:|---:|",
        f"| {a} wins | {report.wins_a} | {report.wins_a}/{n} |",
        f"| {b} wins | {report.wins_b} | {report.wins_b}/{n} |",
        f"| ties (both orders) | {report.ties} | {report.ties}/{n} |",
        f"| inconsistent (orders disagree; a tie) | {report.inconsistent} "
        f"| {report.inconsistent}/{n} |",
        f"| **judged** | **{n}** | of {report.cases_compared} compared |",
        f"| unjudged (excluded) | {report.unjudged} | of {report.cases_compared} compared |",
        "",
        "| rate | value | 95% CI (Wilson) | count |",
        "|---|---:|---:|---:|",
        f"| win rate {a} | {_rate(report.win_rate_a.rate)} "
        f"| {_interval(report.win_rate_a.lo, report.win_rate_a.hi)} "
        f"| {report.win_rate_a.wins}/{report.win_rate_a.n} |",
        f"| win rate {b} | {_rate(report.win_rate_b.rate)} "
        f"| {_interval(report.win_rate_b.lo, report.win_rate_b.hi)} "
        f"| {report.win_rate_b.wins}/{report.win_rate_b.n} |",
        f"| position consistency | {_rate(consistency.rate)} "
        f"| {_interval(consistency.lo, consistency.hi)} "
        f"| {consistency.consistent}/{consistency.judged} |",
        "",
        f"Judge `{report.judge.model or 'none'}` · prompt `{report.judge.prompt_version or 'n/a'}`"
        f" · {report.calls} call(s) · {report.cache_hits} cache hit(s) · "
        f"${report.cost_usd:.4f}",
    ]
    notes = []
    if report.unjudged:
        why = ", ".join(f"{reason}: {count}" for reason, count in report.unjudged_reasons.items())
        notes.append(f"{report.unjudged} pair(s) unjudged and excluded ({why})")
    if report.without_rubric:
        notes.append(f"{report.without_rubric} case(s) have no `llm_judge` rubric: not compared")
    if report.missing_a:
        notes.append(f"{report.missing_a} case(s) with a rubric have no output in {a}")
    if report.missing_b:
        notes.append(f"{report.missing_b} case(s) with a rubric have no output in {b}")
    if report.budget is not None and report.budget.status not in ("allowed", "no_budget"):
        notes.append(f"budget {report.budget.status}: {report.budget.reason}")
    if notes:
        lines += ["", "**Warnings**", *[f"- {note}" for note in notes]]
    lines += [
        "",
        f"Comparison `{report.comparison_id}` · {report.occurred_at:%Y-%m-%d %H:%M} UTC",
    ]
    return "\n".join(lines)
