"""Finished root spans → session signals for the monitor (SPEC §13): numbers, states, times.

One root span (a span without a parent) is one session, identified by its trace id:
- `state`: `failed` when the span's status is ERROR, else `completed` (a finished span ended);
- `input_tokens` / `output_tokens` / `cost_usd`: the root span's own `gen_ai.usage.*` figures
  when it carries any, else the sum over the trace's other spans received so far (child spans
  usually end, and are exported, before their root; `PendingUsage` keeps their figures, bounded);
- `started_at` / `ended_at`: the span's start and end;
- `subject`: `assay.subject` (on the span, then its resource), else `agent:<service.name>` with
  `@<service.version>` when the resource has one;
- `findings_count` / `max_severity`: the root span's `assay.findings_count` (an integer) and
  `assay.max_severity` (none | low | medium | high | critical), when the agent records them.

Only these fields are read; every other attribute, text or not, is left behind with the span.
A root span that cannot become a valid signal is rejected with a reason that names the rule,
never the value. Figures outside physical bounds are rejected, not dropped: a token count that
is not a whole number from 0 to `MAX_TOKENS`, a cost (US dollars) that is not a number from 0 to
`MAX_COST_USD` — negative, NaN and infinite ones included — on any span, root or child, or summed
over a session; and a root span lasting more than `MAX_SESSION_DAYS`. A child span rejected so
is counted among the rejected spans and its figures are not summed.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Final

from pydantic import BaseModel, ValidationError

from assay.intake.otlp.conventions import (
    COST_USD,
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    SpanUsage,
    combined,
    span_usage,
)
from assay.monitor.signals import SUBJECT_RULE, SessionSignal, checked_subject
from assay.otel.traces import STATUS_ERROR, Span

SUBJECT_ATTRIBUTE: Final = "assay.subject"
FINDINGS_COUNT: Final = "assay.findings_count"
MAX_SEVERITY: Final = "assay.max_severity"
SIGNAL_ATTRIBUTES: Final = frozenset(
    {
        SUBJECT_ATTRIBUTE,
        FINDINGS_COUNT,
        MAX_SEVERITY,
        "service.name",
        "service.version",
        *INPUT_TOKENS,
        *OUTPUT_TOKENS,
        COST_USD,
    }
)
"""The only attributes a session signal is made from; the receiver decodes no other."""
MAX_TOKENS: Final = 1_000_000_000
"""The most input (or output) tokens one span or session may report."""
MAX_COST_USD: Final = 1_000_000.0
"""The most US dollars one span or session may report (`gen_ai.usage.cost`)."""
MAX_SESSION_DAYS: Final = 30
"""The longest a root span (a session) may last."""
PENDING_TRACES: Final = 100_000
"""Traces whose child figures wait for their root span; the oldest is dropped beyond this."""


class PendingUsage:
    """Usage figures of child spans whose root span has not arrived yet, per trace (bounded).

    Thread-safe: the HTTP route runs in a thread pool. Held in memory by one server process.
    """

    def __init__(self, capacity: int = PENDING_TRACES) -> None:
        self.capacity = capacity
        self._figures: OrderedDict[str, SpanUsage] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, trace_id: str, figures: SpanUsage) -> None:
        """Add a child span's figures to its trace's running total."""
        if figures == SpanUsage():
            return
        with self._lock:
            total = self._figures.pop(trace_id, SpanUsage())
            self._figures[trace_id] = combined([total, figures])
            while len(self._figures) > self.capacity:
                self._figures.popitem(last=False)

    def clear(self) -> None:
        """Forget every trace's figures."""
        with self._lock:
            self._figures.clear()

    def take(self, trace_id: str) -> SpanUsage:
        """The trace's collected figures, forgotten from now on."""
        with self._lock:
            return self._figures.pop(trace_id, SpanUsage())


class Rejection(ValueError):
    """A root span that cannot become a session signal; the message names the rule."""


def subject_of(span: Span) -> str:
    """`assay.subject`, else `agent:<service.name>[@<service.version>]`.

    Raises:
        Rejection: the subject would not be a well-formed `KIND:ID[@VARIANT]`.
    """
    given = span.attribute(SUBJECT_ATTRIBUTE)
    if given is None:
        service = span.resource.get("service.name")
        version = span.resource.get("service.version")
        if not isinstance(service, str):
            raise Rejection("no assay.subject attribute and no service.name resource attribute")
        given = f"agent:{service}" + (f"@{version}" if isinstance(version, str) else "")
        rule = f"agent:<service.name>@<service.version> {SUBJECT_RULE}"
    else:
        rule = f"assay.subject {SUBJECT_RULE}"
    if not isinstance(given, str):
        raise Rejection(rule)
    try:
        return checked_subject(given)
    except ValueError:
        raise Rejection(rule) from None


def _token_rule(name: str) -> str:
    return f"{name} must be a whole number from 0 to {MAX_TOKENS:,}"


_COST_RULE: Final = f"{COST_USD} must be a number from 0 to {MAX_COST_USD:,.0f} (US dollars)"


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def bounded_usage(span: Span) -> SpanUsage:
    """The span's usage figures (`span_usage`), each checked against its physical bound.

    Raises:
        Rejection: a figure outside its bound (negative, NaN, infinite or implausibly large).
    """
    for names in (INPUT_TOKENS, OUTPUT_TOKENS):
        for name in names:
            value = span.attributes.get(name)
            if _is_number(value) and not (isinstance(value, int) and 0 <= value <= MAX_TOKENS):
                raise Rejection(_token_rule(name))
    cost = span.attributes.get(COST_USD)
    if _is_number(cost) and not (0 <= cost <= MAX_COST_USD):  # type: ignore[operator]
        raise Rejection(_COST_RULE)  # NaN fails the comparison too
    return span_usage(span)


def _checked_totals(figures: SpanUsage) -> SpanUsage:
    for name, value in (
        (INPUT_TOKENS[0], figures.input_tokens),
        (OUTPUT_TOKENS[0], figures.output_tokens),
    ):
        if value is not None and value > MAX_TOKENS:
            raise Rejection(f"{_token_rule(name)} summed over the session")
    if figures.cost_usd is not None and not (
        math.isfinite(figures.cost_usd) and figures.cost_usd <= MAX_COST_USD
    ):
        raise Rejection(f"{_COST_RULE} summed over the session")
    return figures


def _moment(unix_ns: int) -> datetime:
    return datetime.fromtimestamp(unix_ns / 1e9, UTC)


def root_signal(root: Span, children: SpanUsage) -> SessionSignal:
    """The session signal of one finished root span.

    Args:
        root: The root span.
        children: Usage of the trace's other spans, used when the root carries none.

    Raises:
        Rejection: the span has no end time, lasts longer than `MAX_SESSION_DAYS`, has a
            figure outside its bound, or no well-formed subject.
    """
    if not root.end_ns or not root.start_ns or root.end_ns < root.start_ns:
        raise Rejection("a root span needs a start and an end time, in that order")
    if root.end_ns - root.start_ns > MAX_SESSION_DAYS * 86_400 * 10**9:
        raise Rejection(f"a root span lasts at most {MAX_SESSION_DAYS} days")
    own = bounded_usage(root)
    figures = _checked_totals(own if own != SpanUsage() else children)
    try:
        return SessionSignal.model_validate(
            {
                "session_id": root.trace_id,
                "subject": subject_of(root),
                "state": "failed" if root.status_code == STATUS_ERROR else "completed",
                "findings_count": root.attributes.get(FINDINGS_COUNT),
                "max_severity": root.attributes.get(MAX_SEVERITY),
                "input_tokens": figures.input_tokens,
                "output_tokens": figures.output_tokens,
                "cost_usd": figures.cost_usd,
                "started_at": _moment(root.start_ns),
                "ended_at": _moment(root.end_ns),
            }
        )
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False, include_context=False)[0]
        field = ".".join(str(step) for step in first["loc"])
        named = {"findings_count": FINDINGS_COUNT, "max_severity": MAX_SEVERITY}.get(field, field)
        problem = first["msg"].removeprefix("Value error, ")
        raise Rejection(f"{named}: {problem}" if named else problem) from None


class SignalBatch(BaseModel):
    """The signals made from one batch of spans, and the root spans that were rejected."""

    signals: list[SessionSignal] = []
    spans: int = 0
    rejected: dict[str, int] = {}
    """Reason → number of spans rejected for it."""

    @property
    def rejected_spans(self) -> int:
        return sum(self.rejected.values())


def session_signals(spans: list[Span], pending: PendingUsage) -> SignalBatch:
    """One signal per root span in `spans`; child spans' usage goes to `pending` or their root
    (a child whose figures are out of bounds is rejected instead)."""
    batch = SignalBatch(spans=len(spans))
    roots = {span.trace_id: span for span in spans if span.is_root}
    children: dict[str, list[SpanUsage]] = {}

    def reject(exc: Rejection) -> None:
        batch.rejected[str(exc)] = batch.rejected.get(str(exc), 0) + 1

    for span in spans:
        if span.is_root:
            continue
        try:
            figures = bounded_usage(span)
        except Rejection as exc:
            reject(exc)
            continue
        if span.trace_id in roots:
            children.setdefault(span.trace_id, []).append(figures)
        else:
            pending.add(span.trace_id, figures)
    for span in spans:
        if not span.is_root:
            continue
        figures = combined([pending.take(span.trace_id), *children.get(span.trace_id, [])])
        try:
            batch.signals.append(root_signal(span, figures))
        except Rejection as exc:
            reject(exc)
    return batch
