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

Through the judging service (`assay.judge.service`), spending is cached, budgeted and priced:
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
from dataclasses import replace
from datetime import UTC, datetime
from typing import Final, Literal

from assay.errors import AssayError, shown
from assay.findings import budget_finding
from assay.findings import record as record_finding
from assay.finops.budget import Decision
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import cache_key
from assay.judge.port import (
    PairRequest,
    PairVerdict,
    Winner,
)
from assay.judge.prompts import load_prompt
from assay.judge.service import JudgeSetup, judge_pair_requests
from assay.judge.spending import Spender
from assay.multiplicity import win_slices
from assay.outputs.index import index_outputs
from assay.outputs.slices import read_slice
from assay.pairwise.report import (
    PairwiseReport,
    PositionConsistency,
    WinRate,
    report_key,
)
from assay.scorers.judge import LlmJudgeConfig
from assay.store import EvidenceStore
from assay.store.write_once import write_once
from assay.suites.registry import SuiteVersion
from assay.suites.suite import Case, Suite

logger = logging.getLogger(__name__)

PAIRWISE_PROMPT: Final = "pairwise"
"""The prompt template pairwise verdicts use (`assay/judge/prompts/pairwise.txt`)."""

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


def pairwise_setup(setup: JudgeSetup, prompt: str = PAIRWISE_PROMPT) -> JudgeSetup:
    """A run's judge setup (`blocks.judge_settings.judge_setup`) turned to pairwise judging.

    Everything is kept (judge, concurrency, prices, budgets, fresh) except the prompt version,
    which becomes the pairwise template's: it is what the cache is keyed on and what the
    report records. The adapter uses the same template by default (`OpenAIJudge`'s
    `pairwise_prompt`); verdicts stamped with any other version are never cached.
    """
    if setup.make_judge is None:
        return setup
    return replace(
        setup, prompt_version=setup.redaction.prompt_version(load_prompt(prompt).version)
    )


def _cache_key(hasher: OutputHasher, case: Case, request: PairRequest, setup: JudgeSetup) -> str:
    """Keyed by case content, both outputs' keyed hashes in presentation order, the rubric and
    the judge pin: the two orders of one case are two entries."""
    content = {
        "case": case.content_hash,
        "first": hasher(request.first),
        "second": hasher(request.second),
        "rubric": request.rubric,
    }
    return cache_key(hasher, "pairwise", setup.pin, content)


def _read_texts(uri: str, known: set[str], selected: list[str]) -> tuple[dict[str, str], int]:
    """The outputs of the selected cases by case id, and how many selected cases have none."""
    index = index_outputs(uri, known, selected, READ_CHUNK)
    wanted = frozenset(selected)
    texts: dict[str, str] = {}
    for piece in index.slices:
        for output in read_slice(piece, wanted):
            texts[output.case_id] = output.output
    return texts, len(index.missing)


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
        PairwiseError: the comparison id is unusable.
        JudgeUnsupportedError: the configured judge cannot compare pairs.
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

    keys: list[tuple[str, Order]] = []
    requests: list[tuple[str, PairRequest]] = []
    hasher = OutputHasher(store_secret(store)) if setup.make_judge is not None else None
    for case_id in shared:
        case, config = cases[case_id], rubrics[case_id]
        assert config is not None
        for order in ORDERS:
            first, second = (texts_a, texts_b) if order == "ab" else (texts_b, texts_a)
            request = PairRequest(
                case_id=case_id,
                input=case.input,
                expected=case.expected,
                rubric=config.rubric,
                first=first[case_id],
                second=second[case_id],
            )
            key = "" if hasher is None else _cache_key(hasher, case, request, setup)
            keys.append((case_id, order))
            requests.append((key, request))

    def record_budget_finding(decision: Decision) -> None:
        finding = budget_finding(
            decision, comparison_id, version.suite, version.version, subject, at
        )
        if finding is not None:
            record_finding(store, finding)

    batch = judge_pair_requests(
        store,
        setup,
        requests,
        Spender(comparison_id, suite.suite, subject, at),
        batch_size=BATCH_REQUESTS,
        on_decision=record_budget_finding,
    )
    verdicts = dict(zip(keys, batch.verdicts, strict=True))

    tally: Counter[PairOutcome] = Counter()
    reasons: Counter[str] = Counter()
    by_tag: dict[str, Counter[PairOutcome]] = {}
    for case_id in shared:
        ab, ba = verdicts[(case_id, "ab")], verdicts[(case_id, "ba")]
        outcome = pair_outcome(ab, ba)
        tally[outcome] += 1
        for tag in cases[case_id].tags:
            by_tag.setdefault(tag, Counter())[outcome] += 1
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
        win_rate_a=WinRate.of(tally["a"], judged, wins=tally["a"], n=judged),
        win_rate_b=WinRate.of(tally["b"], judged, wins=tally["b"], n=judged),
        position_consistency=PositionConsistency.of(
            consistent, judged, consistent=consistent, judged=judged
        ),
        judge=setup.pin,
        calls=batch.calls,
        cache_hits=batch.cache_hits,
        cost_usd=batch.cost_usd,
        budget=batch.decision,
        occurred_at=at,
        slices=win_slices(
            f"{version.suite}@{version.version} · {label_a} vs {label_b}",
            comparison_id,
            {tag: (t["a"], t["b"], t.total() - t["unjudged"]) for tag, t in by_tag.items()},
        ),
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
    return write_once(store, report_key(comparison_id), report)
