"""`assay report`: a run, a suite's trend or a calibration report as one self-contained HTML
page (no network needed to open it, no output text in it unless `--outputs` joins the user's own,
`assay view`'s page, written only to the `-o` file named)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from assay import help_texts
from assay.cli import _common as common

if TYPE_CHECKING:
    from assay.store import EvidenceStore


@common.app.command("report")
def report_command(
    run_id: Annotated[
        str | None, typer.Argument(help="The run (id or unique prefix) to report on.")
    ] = None,
    against: Annotated[
        str | None,
        typer.Option("--against", help="Compare with this run (default: the recorded baseline)."),
    ] = None,
    cross_suite: Annotated[
        bool,
        typer.Option("--cross-suite", help=common.flag_help(help_texts.CROSS_SUITE)),
    ] = False,
    outputs: Annotated[
        str | None,
        typer.Option(
            "--outputs",
            help="With RUN_ID and -o FILE: the page of `assay view`, the run's cases beside "
            "these outputs (each verified against the run's evidence).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="HTML file to write (default: report-NAME.html)."),
    ] = None,
    trend: Annotated[
        str | None,
        typer.Option("--trend", help="Instead: SUITE's pass rate over its last runs."),
    ] = None,
    subject: Annotated[
        str | None,
        typer.Option("--subject", help="With --trend: KIND:ID (all variants) or KIND:ID@V."),
    ] = None,
    last: Annotated[
        int, typer.Option("--last", help="With --trend: runs per subject.", min=1)
    ] = 20,
    calibration: Annotated[
        str | None,
        typer.Option("--calibration", help="Instead: the calibration report REPORT_ID."),
    ] = None,
    store: common.StoreOption = None,
    server: common.ServerOption = None,
    local: common.LocalOption = False,
) -> None:
    """Write one self-contained HTML report: a run (with its comparison, trials, judge and
    per-case table), a suite's trend (--trend) or a calibration report (--calibration)."""
    chosen = [
        name
        for name, given in (("RUN_ID", run_id), ("--trend", trend), ("--calibration", calibration))
        if given
    ]
    if len(chosen) != 1:
        common.fail("give exactly one of RUN_ID, --trend SUITE or --calibration REPORT_ID")
    if against is not None and run_id is None:
        common.fail("--against needs a RUN_ID")
    if cross_suite and against is None:
        common.fail("--cross-suite needs --against RUN_ID: the recorded comparison is kept")
    if subject is not None and trend is None:
        common.fail("--subject needs --trend")
    if outputs is not None and (run_id is None or output is None):
        common.fail("--outputs needs a RUN_ID and -o FILE: the page holds output text")
    endpoint = common.service(server, store, local=local)
    if endpoint is not None and (run_id is None or against is not None or outputs is not None):
        if not endpoint.local:
            common.fail("through a service, assay report writes a run's report: RUN_ID alone")
        endpoint = None  # the local service's store is this one: built here
    if endpoint is not None and run_id is not None:
        from assay.cli import remote

        html, name = remote.report(endpoint, run_id), f"report-{run_id}.html"
        _write(output or Path(name), html)
        return
    evidence = common.open_evidence(store)
    # Imported here: matplotlib and the page builders load only for this command.
    if run_id is not None:
        from assay.reports.run import run_report

        run_id = _named(evidence, run_id)
        if against is not None:
            against = _named(evidence, against)
        if outputs is not None:
            from assay.reports.view import join_outputs, view_page

            joined = join_outputs(
                evidence, run_id, outputs, against=against, cross_suite=cross_suite
            )
            html, name = view_page(joined), ""
        else:
            html = run_report(evidence, run_id, against, cross_suite=cross_suite)
            name = f"report-{run_id}.html"
    elif trend is not None:
        from assay.reports.trend import trend_page

        html, name = trend_page(evidence, trend, subject, last), f"trend-{trend}.html"
    else:
        assert calibration is not None
        from assay.reports.calibration import calibration_page, find_report

        html = calibration_page(find_report(evidence, calibration))
        name = f"calibration-{calibration}.html"
    _write(output or Path(name), html)


def _named(evidence: EvidenceStore, given: str) -> str:
    """The run `given` names (an id or a unique prefix): one line and exit 2 when none does."""
    from assay.runs.records import resolve_run_id

    return common.guarded(lambda: resolve_run_id(evidence, given))


def _write(target: Path, html: str) -> None:
    target.write_text(html, encoding="utf-8")
    common.out.print(f"wrote {target} ({len(html.encode()):,} bytes)")
