"""The page that shows what the agent said (`assay view RUN_ID --outputs PATH`, `assay report
RUN_ID --outputs PATH -o FILE`): the run's cases as its report reads them (`load_view`), each
joined *at view time* to the user's own record of it — the output text, the turns, the tool calls
with their arguments and results — beside the case's verdict, its checks' labels and the judge's.

Verified first: a record is joined only when its keyed hash (`assay.hashing.OutputHasher` under
the store's secret) equals the `output_hmac` the run's evidence keeps for that case (and trial).
A record that differs is marked "not the scored output" and its text is not shown beside
verdicts that are not about it; a case with no record says so.

Nothing here writes: the outputs are read into memory only (the scoring's own reader,
`index_outputs` and `read_slice`), and the page is returned for the caller to serve from memory
or write where the user named. The store is only read (its secret included: a store without one
verifies nothing rather than gaining one). Every text from a record is escaped (`page.text`);
the page carries the report's one hashed script and its Content-Security-Policy.
"""

from __future__ import annotations

import hmac
import json
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

from assay.errors import InputError
from assay.hashing import SECRET_ENV, SECRET_KEY, OutputHasher, store_secret
from assay.intake.record import AgentRecord, Exchange
from assay.outputs.candidate import CandidateOutput
from assay.outputs.index import index_outputs
from assay.outputs.reference import OutputsReference
from assay.outputs.slices import read_slice
from assay.regression import RegressionStatus
from assay.reports import page
from assay.reports.run import (
    MARKS,
    _check_label,
    _header,
    _turn_strip,
    case_filters,
    case_row_head,
)
from assay.reports.run_view import RunView, load_view
from assay.runs.chunks import read_cases
from assay.runs.records import load_result
from assay.runs.scoring import CaseEvidence
from assay.scorers import Status
from assay.store import EvidenceStore
from assay.suites import registry
from assay.trajectory import Trajectory

OUTPUT_CHARS: Final = 20_000
"""Longest output text a cell shows (the rest is cut, and counted by the ellipsis' place)."""
MESSAGE_CHARS: Final = 4_000
"""Longest message, tool result or tool arguments a cell shows."""
MAX_MESSAGES: Final = 200
"""Messages a record's list shows; past them it says how many more."""

META_POLICY: Final = "; ".join(
    directive
    for directive in page.CONTENT_SECURITY_POLICY.split("; ")
    if not directive.startswith("frame-ancestors")
)
"""The report's policy as a page written to a file carries it (a `<meta>` policy cannot say
`frame-ancestors`: Chromium ignores it there with a console warning)."""

_STYLE: Final = """<style>
body { max-width: none; } #cases td:first-child { min-width: 9em; }
.said { min-width: 280px; max-width: 560px; margin: 0 0 6px; }
.said pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 2px 0 4px; padding: 4px 6px;
  background: var(--band); font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; }
.said .standing { margin: 0; font-size: .85rem; }
.said .standing.bad { color: var(--fail); font-weight: 600; }
.said .standing.ok { color: var(--pass); }
.said details summary { cursor: pointer; color: var(--muted); font-size: .85rem; }
.said ol { margin: 2px 0 6px; padding-left: 1.4em; }
.said .role { font-size: .75rem; color: var(--muted); text-transform: uppercase; }
.check-why { color: var(--muted); font-size: .85rem; }
</style>"""


class Standing(StrEnum):
    """What the user's file holds for one evidence record of the run."""

    SCORED = "the scored output"
    """Its keyed hash equals the evidence's: the verdicts beside it are about this text."""
    NOT_SCORED = "not the scored output"
    """A record whose hash differs (or one for a case the run scored no output for)."""
    ABSENT = "no output"
    UNVERIFIED = "not verified"
    """The store holds no secret to hash with: nothing can be joined."""


@dataclass(frozen=True)
class Said:
    """One evidence record's output from the user's file, and whether it is the one scored."""

    standing: Standing
    why: str
    output: CandidateOutput | None = None
    """Only for `Standing.SCORED`: a text that is not the scored one is never shown."""


@dataclass(frozen=True)
class Joined:
    """A run's view with the user's outputs joined to its evidence records."""

    view: RunView
    outputs: str
    said: Mapping[tuple[str, int | None], Said]
    """Per evidence record (case id, trial) of the listed cases."""
    baseline_run: str | None = None
    baseline_outputs: str | None = None
    baseline: Mapping[str, list[CaseEvidence]] | None = None
    """The baseline's evidence records of the listed cases, by case id (trials in order)."""
    baseline_said: Mapping[tuple[str, int | None], Said] | None = None

    def counts(self) -> Counter[Standing]:
        """How many of the listed records the user's file gave, by standing."""
        return Counter(said.standing for said in self.said.values())


def join_outputs(
    store: EvidenceStore,
    run_id: str,
    outputs: str,
    baseline_outputs: str | None = None,
    against: str | None = None,
    *,
    cross_suite: bool = False,
) -> Joined:
    """Read the run's view and the user's outputs, and join them where the hashes agree.

    Raises:
        InputError: the outputs do not read (file, line and field named), hold a case the
            run's suite lacks, or `baseline_outputs` is given for a run with no baseline.
    """
    view = load_view(store, run_id, against, cross_suite=cross_suite)
    hasher = _stored_hasher(store)
    records = [record for case in view.rows for record in _records_of(view, case)]
    said = _join(store, run_id, outputs, records, hasher)
    if baseline_outputs is None:
        return Joined(view, outputs, said)
    comparison = view.comparison
    if comparison is None or comparison.status is RegressionStatus.NO_BASELINE:
        raise InputError("--baseline-outputs", f"run {run_id} has no baseline to compare with")
    baseline_run = comparison.baseline_run
    assert baseline_run is not None
    listed = {case.case_id for case in view.rows}
    baseline: dict[str, list[CaseEvidence]] = {}
    for record in read_cases(store, baseline_run):
        if record.case_id in listed:
            baseline.setdefault(record.case_id, []).append(record)
    flat = [record for trials in baseline.values() for record in trials]
    baseline_said = _join(store, baseline_run, baseline_outputs, flat, hasher)
    return Joined(view, outputs, said, baseline_run, baseline_outputs, baseline, baseline_said)


def _records_of(view: RunView, case: CaseEvidence) -> list[CaseEvidence]:
    """The evidence records behind a row: its trials, or the case itself."""
    return view.trials.get(case.case_id) or [case]


def _stored_hasher(store: EvidenceStore) -> OutputHasher | None:
    """The store's keyed hash, or None when it has no secret yet (`store_secret` would create
    one: a view writes nothing)."""
    if not (os.environ.get(SECRET_ENV) or store.exists(SECRET_KEY)):
        return None
    return OutputHasher(store_secret(store))


def _join(
    store: EvidenceStore,
    run_id: str,
    location: str,
    records: Sequence[CaseEvidence],
    hasher: OutputHasher | None,
) -> dict[tuple[str, int | None], Said]:
    """Each evidence record's output in the user's file, read as the run read its own (format,
    case attribute) and validated by the run's suite's case ids."""
    result = load_result(store, run_id)
    recorded = OutputsReference.parse(result.outputs)
    reference = recorded.model_copy(update={"location": location})
    _, suite = registry.resolve(store, f"{result.suite}@{result.suite_version}")
    wanted = {record.case_id for record in records}
    index = index_outputs(reference, {case.id for case in suite.cases}, wanted, chunk_size=1_000)
    found = {
        (output.case_id, output.trial): output
        for piece in index.slices
        for output in read_slice(piece, wanted)
    }
    return {
        (record.case_id, record.trial): _verified(
            record, found.get((record.case_id, record.trial)), hasher
        )
        for record in records
    }


def _verified(
    record: CaseEvidence, output: CandidateOutput | None, hasher: OutputHasher | None
) -> Said:
    kept = record.output_hmac
    if kept is None:
        if output is None:
            return Said(Standing.ABSENT, "no output: the run had none for this case")
        return Said(
            Standing.NOT_SCORED,
            "not the scored output: the run had no output for this case; your file holds one",
        )
    if output is None:
        return Said(Standing.ABSENT, "no output for this case in your file")
    if hasher is None:
        return Said(
            Standing.UNVERIFIED,
            "not verified: the store holds no output secret (was ASSAY_HMAC_SECRET set for "
            "the run?)",
        )
    if not hmac.compare_digest(hasher(output.output), kept):
        return Said(
            Standing.NOT_SCORED,
            "not the scored output: its keyed hash differs from the run's evidence (edited, "
            "or another run's file), so it is not shown beside these verdicts",
        )
    return Said(Standing.SCORED, "✓ verified: the scored output", output)


def _pre(value: str, limit: int) -> str:
    return f"<pre>{page.text(value, limit)}</pre>"


def _calls(trajectory: Trajectory) -> str:
    items = []
    for number, step in enumerate(trajectory.steps, start=1):
        together = " (made together)" if len(step) > 1 else ""
        for call in step:
            failed = ' <span class="fail">✗ failed</span>' if call.failed else ""
            arguments = json.dumps(call.args, indent=1, sort_keys=True, ensure_ascii=False)
            items.append(
                f"<li>step {number}{together}: <code>{page.text(call.tool, 200)}</code>{failed}"
                f"{_pre(arguments, MESSAGE_CHARS)}</li>"
            )
    return f'<ol class="calls">{"".join(items)}</ol>' if items else ""


def _messages(record: AgentRecord) -> str:
    """The record's messages in order: what the user said, the agent's answers, and each tool
    call's result (the `tool` messages)."""
    items = [
        f'<li><span class="role">{turn.role}</span>{_pre(turn.text, MESSAGE_CHARS)}</li>'
        for turn in record.turns[:MAX_MESSAGES]
    ]
    more = len(record.turns) - MAX_MESSAGES
    tail = page.note(f"+{more} more messages") if more > 0 else ""
    return f'<ol class="messages">{"".join(items)}</ol>{tail}'


def _exchanges(record: AgentRecord, case: CaseEvidence) -> str:
    """A conversation's turns (docs/conversations.md), each beside its turn's verdict."""
    verdicts = {turn.turn: turn for turn in case.turns or ()}
    items = []
    for number, exchange in enumerate(record.conversation(), start=1):
        verdict = verdicts.get(number)
        if verdict is None:
            mark = '<span class="note">not scored (beyond the case\'s turns)</span>'
        else:
            why = "" if verdict.status is Status.PASS else f" {page.text(verdict.label)}"
            mark = (
                f'<b class="{verdict.status.value}">turn {number} {MARKS[verdict.status]}</b>'
                f'<span class="check-why">{why}</span>'
            )
        items.append(f"<li>{mark}{_exchange(exchange)}</li>")
    return f'<ol class="exchanges">{"".join(items)}</ol>'


def _exchange(exchange: Exchange) -> str:
    answer = (
        _pre(exchange.text, MESSAGE_CHARS)
        if exchange.text is not None
        else page.note("(no answer in this turn)")
    )
    return (
        f'<div><span class="role">user</span>{_pre(exchange.user, MESSAGE_CHARS)}</div>'
        + _calls(exchange.trajectory)
        + f'<div><span class="role">agent</span>{answer}</div>'
    )


def _shown(record: CaseEvidence, said: Said, of_baseline: bool = False) -> str:
    """One evidence record's output: its standing, then (when it is the scored output) the text,
    and the turns and tool calls under a disclosure. A trial, and a baseline's record, say their
    own verdict first (a row's is in its status column)."""
    named = (
        f"trial {record.trial}" if record.trial is not None else ("baseline" if of_baseline else "")
    )
    verdict = (
        f'<b class="{record.status.value}">{named} {MARKS[record.status]} {record.status.value}</b>'
        if named
        else ""
    )
    output = said.output
    if output is None:
        return (
            f'<div class="said" data-said="{said.standing.name.lower()}">{verdict}'
            f'<p class="standing bad">{page.text(said.why, 400)}</p></div>'
        )
    parts = [_pre(output.output, OUTPUT_CHARS)]
    found = output.record
    if found is None:
        parts.append(page.note("the line holds only output: no turns or tool calls"))
    else:
        calls = sum(len(step) for step in found.trajectory.steps)
        inside = (
            _exchanges(found, record)
            + "<details><summary>every message, tool results included</summary>"
            + f"{_messages(found)}</details>"
            if record.turns is not None
            else _calls(found.trajectory) + _messages(found)
        )
        unseen = [f"{evidence}: {why}" for evidence, why in found.unseen.items()]
        parts.append(
            f"<details><summary>{len(found.turns)} messages · {calls} tool calls "
            f"({page.text(found.source)})</summary>{inside}{page.bullets(unseen)}</details>"
        )
    return (
        f'<div class="said" data-said="scored">{verdict}'
        f'<p class="standing ok">{page.text(said.why)}</p>{"".join(parts)}</div>'
    )


def _checks(case: CaseEvidence) -> str:
    """Each check's mark and label, and why it did not pass: the judge's verdict is its
    `llm_judge` check's."""
    return "".join(
        _check_label(check)
        + (f' <span class="check-why">{page.text(check.reason)}</span>' if check.reason else "")
        + "<br>"
        for check in case.checks
    )


def _baseline_cell(joined: Joined, case_id: str) -> str:
    assert joined.baseline is not None and joined.baseline_said is not None
    records = joined.baseline.get(case_id)
    if not records:
        return page.note("not in the baseline run")
    return "".join(
        _shown(record, joined.baseline_said[(record.case_id, record.trial)], of_baseline=True)
        + f'<p class="check-why">{page.text(record.label)}</p>'
        for record in records
    )


def _case_table(joined: Joined) -> str:
    """The report's case table (its columns, filters and the hooks of its one script: `#cases`,
    `data-s`, `data-k`, the tags in the fourth cell), with the user's outputs after the label."""
    view = joined.view
    compared = view.baseline_verdicts is not None
    sided = joined.baseline is not None
    conversations = any(case.turns is not None for case in view.rows)
    kinds: set[str] = set()
    tags: set[str] = set()
    rows = []
    for case in view.rows:
        every_check = [*case.checks, *(c for turn in case.turns or () for c in turn.checks)]
        said = "".join(
            _shown(record, joined.said[(record.case_id, record.trial)])
            for record in _records_of(view, case)
        )
        rows.append(
            case_row_head(view, case, every_check, kinds, tags)
            + (f"<td>{_turn_strip(case)}</td>" if conversations else "")
            + f"<td>{_checks(case)}</td>"
            + (f"<td>{page.text(view.change(case))}</td>" if compared else "")
            + f"<td>{page.text(case.label)}</td><td>{said}</td>"
            + (f"<td>{_baseline_cell(joined, case.case_id)}</td>" if sided else "")
            + "</tr>"
        )
    filters = case_filters(kinds, tags)
    columns = [
        "case",
        "status",
        "score",
        "tags",
        *(["turns"] if conversations else []),
        "checks (and the judge's verdict)",
        *(["vs baseline"] if compared else []),
        "label",
        "what the agent said",
        *([f"baseline {joined.baseline_run}"] if sided else []),
    ]
    head = "".join(f"<th>{page.text(h)}</th>" for h in columns)
    table = (
        f'<table id="cases"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )
    listed = (
        page.note(
            f"{len(rows):,} of {view.cases:,} cases listed: first every case that did not pass "
            "or changed against the baseline, then passing ones."
        )
        if view.omitted
        else ""
    )
    return page.section(f"Cases ({len(rows):,})", listed, filters, table, anchor="every-case")


def _joining(joined: Joined) -> str:
    counts = joined.counts()
    figures = [(standing.value, f"{counts[standing]:,}") for standing in Standing]
    lines = [
        f"outputs: {joined.outputs}",
        *(
            [f"baseline {joined.baseline_run} outputs: {joined.baseline_outputs}"]
            if joined.baseline_outputs is not None
            else []
        ),
    ]
    return page.section(
        "What the agent said",
        page.figures(figures),
        page.bullets(lines),
        page.note(
            "Joined at view time: a record is shown only when its keyed hash equals the one the "
            "run's evidence keeps. Nothing of these outputs is stored: this page lives in memory "
            "(assay view) or in the file you named."
        ),
        anchor="said",
    )


def view_page(joined: Joined) -> str:
    """The whole page: the run's header, the joining's counts, the case table with outputs."""
    result = joined.view.result
    body: Iterable[str] = [
        _STYLE,
        *_header(joined.view),
        _joining(joined),
        _case_table(joined),
    ]
    document = page.document(f"{result.suite} · {result.subject} · {result.run_id} · view", body)
    policy = f'<meta http-equiv="Content-Security-Policy" content="{META_POLICY}">'
    return document.replace("<head>", f"<head>{policy}", 1)
