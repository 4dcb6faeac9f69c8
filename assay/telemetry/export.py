"""Sending a finished run's results out as OpenTelemetry events, when `ASSAY_OTEL_EXPORT` asks.

`export_run` is called once at the end of a suite run, from the place its records are final
(`flows/suite_run.py`). With the variable unset it returns at once and nothing OpenTelemetry is
imported; with it set, it reads the run's evidence one chunk at a time, links each traced case
to its case span, and sends the events with the OpenTelemetry SDK (`assay.telemetry.sender`).
It never raises: a bad setting, an unreadable trace export or an endpoint that does not answer
is one warning line for the run's log, and the run's verdict stands.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from pydantic import BaseModel

from assay.runs.chunks import read_cases
from assay.runs.records import EvalResult
from assay.store import EvidenceStore
from assay.telemetry.events import JudgeProvenance, Tally, TraceLink, run_events

EXPORT_VARIABLE: Final = "ASSAY_OTEL_EXPORT"
LOGS_PATH: Final = "/v1/logs"
DEFAULT_ENDPOINT: Final = "http://localhost:4318"
"""The OTLP/HTTP default (the specification's, and the SDK's) when no endpoint is named."""
_ON: Final = frozenset({"1", "true", "yes", "on"})
_OFF: Final = frozenset({"", "0", "false", "no", "off"})


class SettingError(ValueError):
    """`ASSAY_OTEL_EXPORT` holds something other than a switch or an http(s) URL."""


def logs_endpoint(environ: Mapping[str, str]) -> str | None:
    """The OTLP/HTTP logs URL the events go to, or None when export is off.

    `ASSAY_OTEL_EXPORT` is `1`/`true` (the standard variables name the endpoint:
    `OTEL_EXPORTER_OTLP_LOGS_ENDPOINT` as is, else `OTEL_EXPORTER_OTLP_ENDPOINT` + `/v1/logs`,
    else `http://localhost:4318/v1/logs`) or an http(s) URL, a base endpoint like
    `OTEL_EXPORTER_OTLP_ENDPOINT` (`/v1/logs` appended unless it already ends so).

    Raises:
        SettingError: any other value.
    """
    value = environ.get(EXPORT_VARIABLE, "").strip()
    if value.lower() in _OFF:
        return None
    if value.lower() in _ON:
        if signal := environ.get("OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "").strip():
            return signal
        value = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or DEFAULT_ENDPOINT
    elif not value.startswith(("http://", "https://")):
        raise SettingError(
            f"{EXPORT_VARIABLE} must be 1, true or an http(s) URL of an OTLP endpoint; "
            "results were not exported"
        )
    base = value.rstrip("/")
    return base if base.endswith(LOGS_PATH) else base + LOGS_PATH


class ExportOutcome(BaseModel):
    """What one run's export did: where it sent, how many events arrived, and the one warning
    line for the run's log when something did not."""

    endpoint: str | None
    results: int = 0
    """`gen_ai.evaluation.result` events built (one per case evidence)."""
    linked: int = 0
    """Of those, parented to the case span of the trace the output came from."""
    sent: int = 0
    """Events the endpoint accepted, the summary included."""
    warning: str | None = None


def trace_links(outputs: str) -> dict[str, TraceLink]:
    """Each traced case's case span, by case id, read from the run's OTLP trace exports (none
    for JSONL outputs or transcripts). A conversation joined from several traces links to its
    first trace's case span (else the root span that turn is read from) and names the others.
    Only ids are kept: the spans' text is decoded in memory, as indexing does, and let go with
    the documents."""
    from assay.intake.otlp.index import TraceBook, read_documents
    from assay.outputs.reference import OutputsReference
    from assay.outputs.sources import formatted_sources

    reference = OutputsReference.parse(outputs)
    traces = [source for source, kind in formatted_sources(reference) if kind == "otlp"]
    if not traces:
        return {}
    book = TraceBook(reference.case_attribute, keep_spans=False)
    for source in traces:
        read_documents(book, source, None)
    links = {}
    for conversation in book.conversations():
        first, *others = conversation.traces
        span_id = first.case_span_id or first.root_span_id
        if span_id is not None:
            links[conversation.case_id] = TraceLink(
                trace_id=first.trace_id,
                span_id=span_id,
                other_traces=tuple(trace.trace_id for trace in others),
            )
    return links


def judge_provenance(store: EvidenceStore, result: EvalResult) -> JudgeProvenance | None:
    """The run's judge pin and its admission state from the admission records (None when the
    run judged nothing)."""
    if result.judge is None or result.judge.model is None:
        return None
    from assay.admission.figures import judge_admission
    from assay.judge.port import JudgePin

    pin = JudgePin(**result.judge.model_dump())
    state = judge_admission(store, pin)
    word = (
        "admitted"
        if state.admitted
        else "never_admitted"
        if state.admission_id is None
        else "not_admitted"
    )
    return JudgeProvenance(
        pin=pin,
        admission=word,
        admission_id=state.admission_id,
        battery_version=state.battery_version,
    )


def export_run(
    store: EvidenceStore, result: EvalResult, environ: Mapping[str, str] | None = None
) -> ExportOutcome | None:
    """Send the run's events when `ASSAY_OTEL_EXPORT` is set (None when it is not); never
    raises."""
    environ = os.environ if environ is None else environ
    if environ.get(EXPORT_VARIABLE, "").strip().lower() in _OFF:
        return None
    try:
        endpoint = logs_endpoint(environ)
    except SettingError as exc:
        return ExportOutcome(endpoint=None, warning=str(exc))
    assert endpoint is not None
    outcome = ExportOutcome(endpoint=endpoint)
    notes: list[str] = []
    try:
        links = trace_links(result.outputs)
    except Exception as exc:  # an export must not fail the run it reports
        links = {}
        notes.append(f"cases not linked to their traces ({type(exc).__name__})")
    try:
        from assay.telemetry.sender import send
    except ImportError:
        outcome.warning = (
            f"{EXPORT_VARIABLE} is set but the OpenTelemetry SDK is not installed "
            "(pip install 'assay[otel]'); results were not exported"
        )
        return outcome
    try:
        tally = Tally()
        events = run_events(
            result, read_cases(store, result.run_id), links, judge_provenance(store, result), tally
        )
        sent = send(events, endpoint)
        outcome.results, outcome.linked = tally.results, tally.linked
        outcome.sent = sent.accepted
        if sent.failure is not None:
            notes.append(f"{sent.failure}; {sent.accepted} of the run's events were accepted")
    except Exception as exc:  # an export must not fail the run it reports
        notes.append(f"the export stopped ({type(exc).__name__}: {exc})")
    if notes:
        outcome.warning = (
            f"OpenTelemetry export of run {result.run_id} to {endpoint}: "
            + "; ".join(notes)
            + " (the run's result stands)"
        )
    return outcome
