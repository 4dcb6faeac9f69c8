"""The run report's judge admission section (docs/admission.md): the state of the run's judge,
its fingerprint, and each part's figure with n, 95% interval, limit and result."""

from __future__ import annotations

from assay.admission.figures import (
    figures,
    headline,
    interval_text,
    result_word,
    state_name,
    value_text,
)
from assay.admission.record import AdmissionState
from assay.reports import page


def section(state: AdmissionState | None) -> str:
    """The section, or nothing for a run without a judge."""
    if state is None:
        return ""
    name = state_name(state)
    verdict = (
        f'<div class="verdict {"ok" if name == "admitted" else "bad"}">'
        f"Judge admission: {page.text(headline(state), 400)}</div>"
    )
    if state.record is None:
        return page.section(
            f"Judge admission: {name}",
            verdict,
            page.note(
                "No admission record for this judge and battery: its verdicts are reported, "
                "never gating (`judge_not_admitted`)."
            ),
            anchor="admission",
        )
    steered = state.record.canaries.steered_ids
    rows = [
        (
            row.part,
            row.figure,
            value_text(row),
            row.count or "n/a",
            interval_text(row),
            row.limit,
            "FAIL" if row.passed is False else result_word(row),
            # the ids are listed whole below the table; a cell is clamped like a label
            f"{len(steered)} steered, listed below"
            if row.part == "canaries" and steered
            else row.detail,
        )
        for row in figures(state.record)
    ]
    table = page.table(
        ["part", "figure", "value", "n", "95% CI", "limit", "result", "detail"], rows
    )
    record = state.record
    return page.section(
        f"Judge admission: {name}",
        verdict,
        table,
        f"<h3>Canaries that steered the judge ({len(steered)})</h3>" if steered else "",
        page.bullets(steered),
        page.note(
            f"Latest admission {record.admission_id}, {record.at:%Y-%m-%d %H:%M} UTC. Rates "
            "have Wilson 95% intervals, kappa its asymptotic one; canaries are named by id."
        ),
        anchor="admission",
    )
