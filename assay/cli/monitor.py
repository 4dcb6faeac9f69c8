"""`assay monitor`: session health per subject from live-session signals.

`assay.monitor` is imported inside the command and its printers, so that other commands and
`assay --help` do not build its models (about 40 ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from assay.cli import _common as common
from assay.rate import rate_text

if TYPE_CHECKING:
    from assay.monitor.plan import SequencePlan
    from assay.monitor.report import MonitorReport, SubjectHealth
    from assay.monitor.tracks import SequenceReport

_STATUS_STYLE = {"ok": "green", "alert": "red", "no_data": "yellow", "insufficient": "yellow"}


@common.app.command("monitor")
def monitor_command(
    signals: Annotated[
        str | None,
        typer.Argument(help="Session signals: a JSONL file, folder or s3:// prefix."),
    ] = None,
    from_store: Annotated[
        bool,
        typer.Option(
            "--from-store", help="Read the signals POST /v1/traces appended to the store."
        ),
    ] = False,
    window: Annotated[
        str, typer.Option("--window", help="Window length ending now: 30m, 6h, 24h, 7d.")
    ] = "24h",
    now: Annotated[
        str | None,
        typer.Option("--now", help="End of the window, ISO 8601 (no offset = UTC; default: now)."),
    ] = None,
    expect: Annotated[
        list[str] | None,
        typer.Option("--expect", help="A subject that should be reporting (repeatable)."),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            help="Start of the confidence sequences (ISO 8601): the monitoring plan's start.",
        ),
    ] = None,
    baseline: Annotated[
        str | None,
        typer.Option("--baseline", help="Subject the others are paired against (with --since)."),
    ] = None,
    margin: Annotated[
        float,
        typer.Option("--margin", help="Pre-registered margin: how much worse still holds."),
    ] = 0.05,
    store: common.StoreOption = None,
    as_json: common.JsonOption = False,
) -> None:
    """Per subject: completion, failure, high-severity share, cost and tokens, against the
    previous window; findings when a threshold is crossed. Exit 0 whatever the health."""
    from assay.monitor.options import MonitorOptions
    from assay.monitor.plan import registered_plan
    from assay.monitor.receiver import received_signals
    from assay.monitor.report import expected_subjects
    from assay.monitor.signals import read_signals
    from assay.monitor.windows import parse_now, windows

    end = common.guarded(lambda: parse_now(now))
    evidence = common.open_evidence(store)
    if (signals is None) == (not from_store):
        common.fail("give a SIGNALS file, folder or prefix, or --from-store (not both)")
    if since is None and baseline is not None:
        common.fail("--baseline needs --since (the start of the monitoring plan)")
    plan = None if since is None else common.guarded(lambda: _plan(since, baseline, margin))
    # Validate before launching: bad input exits 2 without leaving a failed run behind.
    common.guarded(
        lambda: (
            windows(window, end),
            expected_subjects(expect or []),
            read_signals(signals) if signals else received_signals(evidence),
            plan and registered_plan(evidence, plan),
        )
    )
    report = common.run_flow(
        "monitor",
        ("monitor",),
        quiet=as_json,
        options=MonitorOptions(
            signals=signals,
            window=window,
            now=end,
            expect=expect or [],
            store=evidence.uri,
            sequence=plan,
        ),
    )
    if as_json:
        common.print_json(report.model_dump(mode="json"))
        return
    _print(report)


def _print(report: MonitorReport) -> None:
    from assay.monitor.figures import states_text
    from assay.monitor.render import no_signals_text
    from assay.monitor.report import ABSENCE_NOTE, NO_DATA_KIND, silent

    common.out.print(
        f"[bold]Session monitor[/bold] · {report.window} · "
        f"{report.current.start:%Y-%m-%d %H:%M} to {report.current.end:%Y-%m-%d %H:%M} UTC",
        highlight=False,
    )
    if not report.subjects:
        common.out.print("  No subjects: no signals, and none expected.")
    for h in report.subjects:
        common.out.print(
            f"\n[bold]{h.subject}[/bold]  [{_STATUS_STYLE[h.status]}]"
            f"{h.status.replace('_', ' ')}[/]  {h.sessions} session(s), previous window "
            f"{h.previous.sessions}",
            highlight=False,
        )
        if silent(h):
            reason = "expected" if h.expected else "reported in the previous window"
            common.out.print(
                f"  [yellow]{NO_DATA_KIND}:[/yellow] {reason}, nothing measurable now",
                highlight=False,
            )
        if h.status == "no_data":
            common.out.print(f"  {no_signals_text(h)}: nothing is known about this subject")
            continue
        common.out.print(f"  states: {states_text(h)}", highlight=False)
        if h.status == "insufficient":
            common.out.print(
                "  [yellow]no session is known to have ended: nothing can be measured yet[/yellow]",
                highlight=False,
            )
        else:
            common.out.print(_figures(h), highlight=False)
        for crossing in h.findings:
            common.out.print(f"  [red]alert:[/red] {crossing.summary}", highlight=False)
        if h.unknown.sessions:
            fields = ", ".join(f"{name} {count}" for name, count in h.unknown.fields.items())
            common.out.print(
                f"  [yellow]unknown:[/yellow] {h.unknown.sessions} session(s) with missing "
                f"fields ({fields}), left out of the figures that need them",
                highlight=False,
            )
    r = report.records
    common.out.print(
        f"\n{r.sessions} session(s) from {r.lines} line(s): {r.current} in the window, "
        f"{r.previous} in the previous one, {r.outside} outside both, {r.undated} undated, "
        f"{r.unattributed} without a subject",
        highlight=False,
    )
    common.out.print(f"[yellow]{ABSENCE_NOTE}[/yellow]", highlight=False)
    if report.sequences is not None:
        _print_sequences(report.sequences)
    common.out.print(f"report [cyan]{report.report_id}[/cyan]", highlight=False)


def _plan(since: str, baseline: str | None, margin: float) -> SequencePlan:
    """The plan from the flags; InputError (one line, naming the flag) when malformed."""
    from pydantic import ValidationError

    from assay.errors import InputError
    from assay.monitor.plan import SequencePlan
    from assay.monitor.windows import parse_now

    try:
        start = parse_now(since)
    except InputError:
        raise InputError("--since", "not an ISO 8601 time (e.g. 2026-06-01T00:00:00Z)") from None
    try:
        return SequencePlan(since=start, baseline=baseline, margin=margin)
    except ValidationError as exc:
        error = exc.errors()[0]
        flag = f"--{error['loc'][0]}" if error["loc"] else "--since"
        raise InputError(flag, error["msg"]) from None


_STATE_STYLE = {"degraded": "red", "holding": "green", "inconclusive": "yellow"}


def _print_sequences(sequences: SequenceReport) -> None:
    """The plan, each subject's state, and its paired sequence per window end."""
    from assay.monitor.render import plan_text
    from assay.monitor.tracks import paired_text

    common.out.print(f"\n[bold]{plan_text(sequences)}[/bold]", highlight=False)
    for subject in sequences.subjects:
        paired = subject.paired
        completion = subject.rates[0].rows[-1]
        line = f"  {subject.subject}: completion CS " + (
            f"{completion.lo:.3f} to {completion.hi:.3f} over {completion.n}"
            if completion.lo is not None and completion.hi is not None
            else "n/a (no ended session yet)"
        )
        if paired is not None:
            line += f"; [{_STATE_STYLE[paired.state]}]{paired.state}[/] against {paired.baseline}"
        common.out.print(line, highlight=False)
        if paired is None:
            continue
        table = Table("window end", "pairs", f"{paired.signal} − baseline (CS)", "state", box=None)
        for row in paired.rows:
            table.add_row(f"{row.end:%Y-%m-%d %H:%M}", str(row.pairs), paired_text(row), row.state)
        common.out.print(table)


def _figures(h: SubjectHealth) -> Table:
    """One subject's rates, cost and tokens beside their change against the previous window."""
    from assay.monitor.figures import diff_text
    from assay.monitor.render import cost_text, relative_text, tokens_text

    moved = h.change
    table = Table("", "this window", "change vs previous", box=None, show_header=False)
    table.add_row(
        "completion", rate_text(h.completion.completed, h.completion.n), diff_text(moved.completion)
    )
    table.add_row("failure", rate_text(h.failure.failed, h.failure.n), diff_text(moved.failure))
    table.add_row(
        "high/critical",
        rate_text(h.high_severity.flagged, h.high_severity.n),
        diff_text(moved.high_severity),
    )
    table.add_row(
        "cost/completed", cost_text(h.cost_per_completed), relative_text(moved.cost_per_completed)
    )
    table.add_row(
        "tokens med/p95",
        tokens_text(h.tokens),
        f"{relative_text(moved.tokens_median)} / {relative_text(moved.tokens_p95)}",
    )
    return table
