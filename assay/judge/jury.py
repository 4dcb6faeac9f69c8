"""Juries: a judge setting that names several judges, and how their verdicts make one.

A jury (`JudgeFields.jury`) is the judge's own model as the first juror and `jury.jurors` as the
others, each its own model pin, endpoint, key reference and prices, all reading the judge's
prompt with its redaction. `convene` turns the jurors' setups (each built by the one builder,
`blocks.judge_settings.judge_setup`) into one `JudgeSetup` whose pin names every juror's model
pin and the aggregation (`jury_model`): that pin is what a run records, what calibration and
admission (`assay.admission`) hold for — the jury is calibrated and admitted as a whole — and
what the gate reads.

The judging service (`assay.judge.service`) asks each juror in turn as if it were the only
judge (`juror_questions`): under its own cache key (`juror_key`: the question's key and the
juror's pin), reserving its own projected spend at its own prices against the budgets, every
repeat its own call, its prompt redacted by its own adapter. Then, per question, `aggregate`
(or `aggregate_pairs`) takes the jury's verdict from the jurors', fail closed:

- `majority`: pass (fail) when more than half of the k jurors passed (failed); otherwise no
  verdict (`judge split`) — a juror that did not answer counts as no vote;
- `unanimous`: one judged fail fails; a pass needs every juror's pass; anything else (a juror
  unanswered, none failed) is no verdict, with that juror's reason;
- `mean`: the mean score of the jurors that answered, when they are more than half of k, passes
  at the check's `pass_threshold` (0.5 without one); otherwise no verdict.

With no juror answering, the jury's verdict is skipped with the first juror's reason. The jurors'
agreement and effective number of votes are measured by `assay.judge.agreement`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import TYPE_CHECKING, Final, TypeVar

from assay.canonical import content_hash
from assay.judge.config import Aggregation
from assay.judge.port import (
    JUDGE_SPLIT,
    JUDGED,
    JudgePin,
    JudgeRequest,
    PairVerdict,
    Verdict,
    Winner,
)

if TYPE_CHECKING:
    from assay.judge.service import Judged, JudgeSetup

RequestT = TypeVar("RequestT")
VerdictT = TypeVar("VerdictT", Verdict, PairVerdict)
MEAN_PASS: Final = 0.5
"""The mean score a `mean` jury passes at when the check sets no `pass_threshold`."""
_WINNER_SCORE: Final[dict[Winner, float]] = {"first": 1.0, "tie": 0.5, "second": 0.0}


@dataclass(frozen=True)
class Jury:
    """The jurors' setups (the judge's own first) and how their verdicts make the jury's."""

    aggregation: Aggregation
    jurors: tuple[JudgeSetup, ...]


def jury_model(aggregation: Aggregation, models: Sequence[str]) -> str:
    """The model pin a jury is recorded, calibrated and admitted under: every juror's pin and
    the aggregation, e.g. `jury:majority[gpt-a+gpt-b+gpt-c]`."""
    return f"jury:{aggregation}[{'+'.join(models)}]"


def convene(jurors: Sequence[JudgeSetup], aggregation: Aggregation) -> JudgeSetup:
    """One setup judging with every juror (the first juror's setup carries the judge's
    concurrency, redaction and repeats). A juror that cannot judge (no key) leaves the whole
    jury unable, with its reason: a jury is never quietly smaller than declared."""
    first = jurors[0]
    unable = next((juror for juror in jurors if juror.make_judge is None), None)
    if unable is not None:
        return replace(
            first,
            make_judge=None,
            skip_reason=unable.skip_reason,
            model=None,
            prompt_version=None,
            batching=None,
        )
    models = [juror.model or "" for juror in jurors]
    return replace(
        first, model=jury_model(aggregation, models), jury=Jury(aggregation, tuple(jurors))
    )


def jurors_of(setup: JudgeSetup) -> list[JudgeSetup]:
    """Each juror as the service asks it: with the jury's budgets, `fresh`, output cap and
    prompt version (which calibration, a suite's conversation texts or the pairwise prompt may
    have changed since the jury was convened), and the jury's batch-wait reporter on its own
    batching; the jury itself for a single judge."""
    if setup.jury is None:
        return [setup]
    on_wait = None if setup.batching is None else setup.batching.on_wait
    return [
        replace(
            juror,
            budgets=setup.budgets,
            fresh=setup.fresh,
            prompt_version=setup.prompt_version,
            max_output_tokens=setup.max_output_tokens,
            repeats=1,
            batching=None if juror.batching is None else replace(juror.batching, on_wait=on_wait),
        )
        for juror in setup.jury.jurors
    ]


def juror_key(key: str, pin: JudgePin) -> str:
    """The cache key of a juror's verdict on the question under `key`: the question's own key
    (which names the jury) with the juror's pin, so each juror's verdict has its own entry."""
    digest = content_hash(pin.model_dump(mode="json")).removeprefix("sha256:")[:16]
    return f"{key.removesuffix('.json')}.juror-{digest}.json"


def juror_questions(
    setup: JudgeSetup, requests: Sequence[tuple[str, RequestT]]
) -> list[tuple[JudgeSetup, list[tuple[str, RequestT]]]]:
    """What each juror is asked, under its own cache keys: what the service judges and the cost
    plan (`assay.runs.cost_plan`) counts. A single judge is asked the questions as they are."""
    if setup.jury is None:
        return [(setup, list(requests))]
    return [
        (juror, [(juror_key(key, juror.pin), request) for key, request in requests])
        for juror in jurors_of(setup)
    ]


def by_jury(
    setup: JudgeSetup,
    requests: Sequence[tuple[str, RequestT]],
    judge_one: Callable[[JudgeSetup, list[tuple[str, RequestT]]], Judged[VerdictT]],
) -> Judged[VerdictT]:
    """Judge `requests` with every juror in turn (`judge_one`: the service judging with one
    judge, through its cache, preflight and ledger), then take the jury's verdict on each. The
    jury's decision is the first juror's that stopped spending, else the last juror's."""
    from assay.judge.service import Judged  # the service calls this module: no import cycle

    assert setup.jury is not None
    how = setup.jury.aggregation
    judged: Judged[VerdictT] = Judged(verdicts=[])
    by_juror: list[list[VerdictT]] = []
    for juror, asked in juror_questions(setup, requests):
        part = judge_one(juror, asked)
        by_juror.append(part.verdicts)
        judged.calls += part.calls
        judged.cache_hits += part.cache_hits
        judged.cost_usd += part.cost_usd
        judged.over_bound += part.over_bound
        if judged.decision is None or judged.decision.allowed:
            judged.decision = part.decision or judged.decision
    for index, (_, request) in enumerate(requests):
        votes = [verdicts[index] for verdicts in by_juror]
        if isinstance(request, JudgeRequest):
            judged.verdicts.append(aggregate(votes, request, how, setup.pin))  # type: ignore[arg-type]
        else:
            judged.verdicts.append(aggregate_pairs(votes, how, setup.pin))  # type: ignore[arg-type]
    judged.by_juror = by_juror
    return judged


def _stamp(verdicts: Sequence[Verdict | PairVerdict], pin: JudgePin) -> dict[str, object]:
    """What the jury's verdict records besides its answer: the jury's pin, every juror's
    tokens, and the redactions (every juror read the same redacted text)."""
    return {
        "model": pin.model,
        "prompt_version": pin.prompt_version,
        "input_tokens": sum(verdict.input_tokens for verdict in verdicts),
        "output_tokens": sum(verdict.output_tokens for verdict in verdicts),
        "redactions": verdicts[0].redactions,
    }


def _skipped(
    kind: type[VerdictT], reason: str | None, verdicts: Sequence[VerdictT], pin: JudgePin
) -> VerdictT:
    """The jury's verdict without an answer: `reason`, else the first unanswered juror's."""
    if reason is None:
        reason = next(verdict.reason for verdict in verdicts if verdict.status == "skipped")
    return kind.model_validate(
        {"status": "skipped", "reason": reason, **kind._SKIPPED_ANSWER, **_stamp(verdicts, pin)}
    )


def aggregate(
    verdicts: Sequence[Verdict], request: JudgeRequest, aggregation: Aggregation, pin: JudgePin
) -> Verdict:
    """The jury's verdict from its jurors' on one request (see the module docstring)."""
    k = len(verdicts)
    judged = [verdict for verdict in verdicts if verdict.status != "skipped"]
    if not judged:
        return _skipped(Verdict, None, verdicts, pin)
    passes = sum(verdict.status == "pass" for verdict in judged)
    fails = len(judged) - passes
    score = fmean(verdict.score for verdict in judged)
    status: str | None
    if aggregation == "majority":
        status = "pass" if 2 * passes > k else "fail" if 2 * fails > k else None
        if status is None:
            return _skipped(Verdict, JUDGE_SPLIT, verdicts, pin)
    elif aggregation == "unanimous":
        status = "fail" if fails else "pass" if passes == k else None
        if status is None:
            return _skipped(Verdict, None, verdicts, pin)
    else:
        if 2 * len(judged) <= k:
            return _skipped(Verdict, None, verdicts, pin)
        threshold = MEAN_PASS if request.pass_threshold is None else request.pass_threshold
        status = "pass" if score >= threshold else "fail"
    return Verdict.model_validate(
        {"status": status, "score": score, "reason": JUDGED, **_stamp(verdicts, pin)}
    )


def aggregate_pairs(
    verdicts: Sequence[PairVerdict], aggregation: Aggregation, pin: JudgePin
) -> PairVerdict:
    """The jury's preference from its jurors' on one presented pair: `majority`, a winner more
    than half the jurors named; `unanimous`, the winner every juror named (`tie` when all
    answered but disagree); `mean`, first = 1, tie = ½, second = 0 averaged over the answering
    majority. Otherwise no verdict, as for `aggregate`."""
    k = len(verdicts)
    winners = [verdict.winner for verdict in verdicts if verdict.winner is not None]
    if not winners:
        return _skipped(PairVerdict, None, verdicts, pin)
    winner: Winner | None
    if aggregation == "majority":
        winner = next((w for w in set(winners) if 2 * winners.count(w) > k), None)
        if winner is None:
            return _skipped(PairVerdict, JUDGE_SPLIT, verdicts, pin)
    elif aggregation == "unanimous":
        if len(winners) < k:
            return _skipped(PairVerdict, None, verdicts, pin)
        winner = winners[0] if len(set(winners)) == 1 else "tie"
    else:
        if 2 * len(winners) <= k:
            return _skipped(PairVerdict, None, verdicts, pin)
        mean = fmean(_WINNER_SCORE[w] for w in winners)
        winner = "first" if mean > 0.5 else "second" if mean < 0.5 else "tie"
    return PairVerdict.model_validate(
        {"status": "judged", "winner": winner, "reason": JUDGED, **_stamp(verdicts, pin)}
    )
