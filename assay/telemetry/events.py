"""A finished run as OpenTelemetry events: one `gen_ai.evaluation.result` per case, one
`assay.evaluation.summary` per run (docs/otel.md, "Results out as OpenTelemetry").

Pure: the events are plain records (name, attributes, the evaluated span), built from the run's
stored evidence only — ids, statuses, scores and labels made from configuration, never output
text. `assay.telemetry.sender` hands them to the OpenTelemetry SDK.

Attribute names follow the GenAI semantic conventions where they have one
(`gen_ai.evaluation.*`, `error.type`); what the conventions lack — who evaluated, against which
suite version, with which judge and admission, the score's range — is under `assay.*`, the
proposal for semantic-conventions-genai #79 and #39.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict

from assay import __version__
from assay.judge.port import JudgePin
from assay.runs.records import EvalResult
from assay.runs.scoring import CaseEvidence
from assay.scorers import Status

RESULT_EVENT: Final = "gen_ai.evaluation.result"
SUMMARY_EVENT: Final = "assay.evaluation.summary"
JUDGED_KIND: Final = "llm_judge"
SCORER_ERROR: Final = "scorer_error"
"""`error.type` of a case a check could not score (status `error`): the only error Assay
reports on an evaluation result."""
SCORE_MIN: Final = 0.0
SCORE_MAX: Final = 1.0
"""Every Assay score — a check's, a case's (the mean of its scored checks), a run's — is in
[0, 1] (`assay.evaluation.score.min` / `.max`, the #39 proposal)."""

AttributeValue = str | bool | int | float | Sequence[str]
AdmissionWord = Literal["admitted", "not_admitted", "never_admitted"]


class TraceLink(BaseModel):
    """The span a case's output came from: the trace's case span (lower-case hex ids). For a
    conversation joined from several traces, its first trace's, with the others' ids."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    span_id: str
    other_traces: tuple[str, ...] = ()
    """A conversation's later traces, in start order (`assay.trace_ids`: a log record has one
    trace context and, unlike a span, no links)."""


class JudgeProvenance(BaseModel):
    """Which judge a run's judged checks came from, and its admission state when it ran."""

    pin: JudgePin
    admission: AdmissionWord
    admission_id: str | None = None
    battery_version: str


class Event(BaseModel):
    """One OpenTelemetry event (a log record with an event name), parented to `link`'s span
    when the evaluated output came from a trace."""

    name: str
    timestamp: datetime
    attributes: dict[str, AttributeValue]
    link: TraceLink | None = None


def _judge_attributes(judge: JudgeProvenance | None) -> dict[str, AttributeValue]:
    if judge is None:
        return {}
    found: dict[str, AttributeValue | None] = {
        "assay.judge.model": judge.pin.model,
        "assay.judge.prompt_version": judge.pin.prompt_version,
        "assay.judge.admission": judge.admission,
        "assay.judge.admission_id": judge.admission_id,
        "assay.judge.battery_version": judge.battery_version,
    }
    return {name: value for name, value in found.items() if value is not None}


def run_attributes(result: EvalResult) -> dict[str, AttributeValue]:
    """What every event of a run carries: the run, the suite version (the dataset reference),
    the subject, and the evaluator (Assay's scorers, versioned with Assay)."""
    return {
        "assay.run.id": result.run_id,
        "assay.suite.name": result.suite,
        "assay.suite.version": result.suite_version,
        "assay.subject": result.subject,
        "assay.scorer.version": __version__,
        "assay.evaluation.score.min": SCORE_MIN,
        "assay.evaluation.score.max": SCORE_MAX,
    }


def case_event(
    case: CaseEvidence,
    result: EvalResult,
    link: TraceLink | None,
    judge: JudgeProvenance | None,
) -> Event:
    """One case's `gen_ai.evaluation.result`: the suite is the evaluation's name, the case's
    status its label, its score (absent when no check was scored) its value and its label —
    from configuration, at most 120 characters — the explanation."""
    kinds = sorted({check.kind or check.scorer for check in case.checks})
    attributes: dict[str, AttributeValue] = {
        "gen_ai.evaluation.name": result.suite,
        "gen_ai.evaluation.score.label": case.status.value,
        "gen_ai.evaluation.explanation": case.label,
        **run_attributes(result),
        "assay.case.id": case.case_id,
        "assay.scorer.names": kinds,
    }
    if case.score is not None:
        attributes["gen_ai.evaluation.score.value"] = case.score
    if case.status is Status.ERROR:
        attributes["error.type"] = SCORER_ERROR
    if case.trial is not None:
        attributes["assay.case.trial"] = case.trial
    if link is not None and link.other_traces:
        attributes["assay.trace_ids"] = list(link.other_traces)
    if JUDGED_KIND in kinds:
        attributes.update(_judge_attributes(judge))
    return Event(name=RESULT_EVENT, timestamp=result.occurred_at, attributes=attributes, link=link)


def summary_event(
    result: EvalResult, judge: JudgeProvenance | None, results: int, linked: int
) -> Event:
    """The run's `assay.evaluation.summary`: its verdict, figures and provenance, and how many
    result events it sent (`linked` of them parented to a traced case)."""
    metrics = result.metrics
    attributes: dict[str, AttributeValue] = {
        "gen_ai.evaluation.name": result.suite,
        "gen_ai.evaluation.score.label": "passed" if result.passed else "not_passed",
        "gen_ai.evaluation.explanation": result.verdict_reason or "passed",
        **run_attributes(result),
        "assay.run.passed": result.passed,
        "assay.run.pass_threshold": result.pass_threshold,
        "assay.run.min_coverage": result.min_coverage,
        "assay.run.cases": metrics.cases,
        "assay.run.scored": metrics.scored,
        "assay.run.passed_cases": metrics.passed,
        "assay.run.failed_cases": metrics.failed,
        "assay.run.error_cases": metrics.errors,
        "assay.run.skipped_cases": metrics.skipped,
        "assay.run.missing_cases": metrics.missing,
        "assay.run.results_exported": results,
        "assay.run.results_linked": linked,
        **_judge_attributes(judge),
    }
    if result.score is not None:
        attributes["gen_ai.evaluation.score.value"] = result.score
    if result.pass_rate is not None:
        attributes["assay.run.pass_rate"] = result.pass_rate
    if result.regression is not None:
        attributes["assay.run.regression"] = result.regression.status.value
    jury = result.judge_jury
    if jury is not None:
        attributes["assay.judge.jury.aggregation"] = jury.aggregation
        attributes["assay.judge.jury.jurors"] = jury.jurors
        attributes["assay.judge.jury.items"] = jury.items
        if jury.alpha_verdicts is not None:
            attributes["assay.judge.jury.alpha"] = jury.alpha_verdicts
        if jury.effective_votes is not None:
            attributes["assay.judge.jury.effective_votes"] = jury.effective_votes
    return Event(name=SUMMARY_EVENT, timestamp=result.occurred_at, attributes=attributes)


class Tally(BaseModel):
    """How many result events a run's export built, and how many were linked to a trace."""

    results: int = 0
    linked: int = 0


def run_events(
    result: EvalResult,
    cases: Iterable[CaseEvidence],
    links: Mapping[str, TraceLink],
    judge: JudgeProvenance | None,
    tally: Tally,
) -> Iterator[Event]:
    """Every case's result event in evidence order, then the run's summary (counted in
    `tally` as they are built, so a run's cases stream one chunk at a time)."""
    for case in cases:
        link = links.get(case.case_id)
        tally.results += 1
        tally.linked += link is not None
        yield case_event(case, result, link, judge)
    yield summary_event(result, judge, tally.results, tally.linked)
