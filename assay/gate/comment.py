"""The gate as a pull-request comment: GitHub-flavoured markdown, no output text.

`assay gate … --comment FILE` writes it; `assay github comment` posts it and, on the next gate of
the same suite and subject, updates that comment in place: the first line is a hidden marker
(`gate_marker`) that the poster looks for among the pull request's comments. What it holds:
the verdict and every failing rule, the head's and the baseline's pass rates with n and 95%
Wilson intervals, a conversation run's counts (conversations, turns, each turn index's, at most
`TURN_INDEXES_SHOWN` of them), the paired table and exact McNemar p, the flipped case ids (the first
`FLIPS_SHOWN` of each direction, then a count), the judge's admission state (admitted, not
admitted or no record; each part's figure with n and 95% interval; canary ids) and a link to the
run's report when a service URL is known — with the run's report link key, so a reviewer's
browser, which sends no token, opens it (docs/ci.md says why the key may be given to whoever
reads the pull request). Only ids, counts and rule details: never a case's input, output or
judge reasoning.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import quote

from assay.admission.figures import markdown_lines
from assay.gate.decision import GateReport
from assay.rate import Rate
from assay.regression import PairedAnalysis, RegressionStatus
from assay.runs.records import EvalResult
from assay.runs.render import cross_suite_line
from assay.runs.scorecard import conversations_text

FLIPS_SHOWN: Final = 20
"""How many flipped case ids of each direction the comment names before it says `… and N more`."""

MARKER_PATTERN: Final = re.compile(r"<!-- assay-gate:[^\s>]* -->")
"""The hidden marker of an Assay gate comment (`gate_marker`)."""

_MARKER_SAFE: Final = "@:._-+/"
"""Characters a marker keeps as they are; the rest are %-escaped, so no name can end the HTML
comment early (`-->`) or break the marker across lines."""


def gate_marker(suite: str, subject: str) -> str:
    """`<!-- assay-gate:SUITE:SUBJECT -->`: one comment per suite and subject on a pull request."""
    return (
        f"<!-- assay-gate:{quote(suite, safe=_MARKER_SAFE)}:{quote(subject, safe=_MARKER_SAFE)} -->"
    )


def comment_marker(body: str) -> str | None:
    """The gate marker a comment body carries, or None when it carries none."""
    found = MARKER_PATTERN.search(body)
    return found.group(0) if found else None


def _code(text: str) -> str:
    """`text` as an inline code span, whatever backticks or control characters it holds."""
    flat = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)
    fence = "`" * (max((len(run) for run in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{fence}{pad}{flat}{pad}{fence}"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _rate_row(label: str, run_id: str, passed: int, scored: int) -> str:
    rate = Rate.of(passed, scored)
    if rate.rate is None or rate.lo is None or rate.hi is None:
        return f"| {label} | {_code(run_id)} | n/a | {passed}/{scored} | n/a |"
    return (
        f"| {label} | {_code(run_id)} | {rate.rate:.3f} | {passed}/{scored} "
        f"| {rate.lo:.3f}–{rate.hi:.3f} |"
    )


def _flipped(title: str, ids: list[str], total: int) -> str:
    if not total:
        return f"**{title}:** none"
    shown = ", ".join(_code(case_id) for case_id in ids[:FLIPS_SHOWN])
    more = total - min(len(ids), FLIPS_SHOWN)
    return f"**{title} ({total}):** {shown}" + (f" … and {more} more" if more > 0 else "")


def _paired_lines(paired: PairedAnalysis) -> list[str]:
    total = paired.both_pass + paired.baseline_only + paired.candidate_only + paired.both_fail
    interval = (
        ""
        if paired.interval is None
        else f" · drop 95% CI {paired.interval[0]:+.3f} to {paired.interval[1]:+.3f} "
        "(Newcombe, paired)"
    )
    return [
        f"**Paired over the same {total} cases**",
        "",
        "| now fail | now pass | both pass | both fail |",
        "|---:|---:|---:|---:|",
        f"| {paired.baseline_only} | {paired.candidate_only} | {paired.both_pass} "
        f"| {paired.both_fail} |",
        "",
        f"Exact McNemar p = {paired.mcnemar_p:.3g}{interval}",
        "",
        _flipped("Now failing", paired.now_failing_cases, paired.baseline_only),
        "",
        _flipped("Now passing", paired.now_passing_cases, paired.candidate_only),
    ]


def _baseline_lines(result: EvalResult) -> tuple[list[str], list[str]]:
    """The baseline's pass-rate row, and what the comment says of the comparison."""
    regression = result.regression
    if regression is None or regression.status is RegressionStatus.NO_BASELINE:
        return [], ["No baseline: nothing to compare with yet."]
    assert regression.baseline is not None
    b = regression.baseline
    row = [_rate_row("baseline", regression.baseline_run or "", b.passed, b.scored)]
    status = f"Compared with the {regression.baseline_source or ''} baseline: " + (
        f"**{regression.status.value}**"
    )
    stated = [status, ""]
    if regression.cross_suite is not None:
        stated += [_cell(cross_suite_line(regression.cross_suite)), ""]
    if regression.paired is None:
        return row, [
            *stated,
            "No paired comparison: the two runs did not score the same cases.",
        ]
    return row, [*stated, *_paired_lines(regression.paired)]


def gate_comment(report: GateReport, report_url: str | None = None) -> str:
    """The pull-request comment of a gate run (`assay gate --json`'s report, so a gate run in
    this process and one through the service render alike); `report_url` is the Assay
    service's base URL (the comment links `URL/runs/{id}/report?key=K`), None when none is
    known."""
    result = report.result
    heading = "✅ Assay gate passed" if report.verdict == "pass" else "❌ Assay gate failed"
    lines = [
        gate_marker(result.suite, result.subject),
        f"### {heading} · {_code(f'{result.suite}@{result.suite_version}')} · "
        f"{_code(result.subject)}",
        "",
    ]
    if report.reasons:
        lines += [
            "**Failing rules**",
            "",
            *[f"- **{reason.rule}**: {_cell(reason.message)}" for reason in report.reasons],
            "",
        ]
    else:
        lines += [f"Every rule passed ({len(report.rules)}).", ""]
    baseline_row, comparison = _baseline_lines(result)
    m = result.metrics
    lines += [
        "| | run | pass rate | passed/n | 95% CI (Wilson) |",
        "|---|---|---:|---:|---|",
        _rate_row("head", result.run_id, m.passed, m.scored),
        *baseline_row,
        "",
    ]
    if conversations := conversations_text(result):
        lines += [f"Head: {conversations}.", ""]
    if report.admission is not None:
        lines += markdown_lines(report.admission)
    lines += comparison
    if report.warnings:
        lines += [
            "",
            f"<details><summary>{len(report.warnings)} warning(s)</summary>",
            "",
            *[f"- {_cell(note)}" for note in report.warnings],
            "",
            "</details>",
        ]
    if report_url:
        link = f"{report_url.rstrip('/')}/runs/{quote(result.run_id, safe='')}/report"
        if report.report_link_key is not None:
            link += f"?key={quote(report.report_link_key, safe='')}"
        lines += ["", f"[Full report]({link})"]
    return "\n".join(lines) + "\n"
