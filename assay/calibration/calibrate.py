"""Calibrating a judge: judge every labelled item of a set, measure, record the report.

Verdicts go through the judging service like every other judge call (verdict cache, FinOps
preflight with budget scope `suite:calibration`, cost ledger). The item text stays in this
function's memory; the report holds figures only. Conversation items (`on: conversation`) are
asked as a run asks them — the conversation frame before the rubric, or the template it names —
and the versions of those texts join the judge's prompt version, as in the run
(`assay.runs.judging.suite_judge_setup`): the report calibrates exactly that judge.
"""

from __future__ import annotations

from dataclasses import replace

from assay.calibration.labels import CalibrationItem, load_set
from assay.calibration.report import CalibrationReport, current_targets, measure, record_report
from assay.errors import InputError
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import cache_key
from assay.judge.port import JudgePin, JudgeRequest
from assay.judge.prompts import ConversationRubric, conversation_rubric, with_texts
from assay.judge.service import JudgeSetup, judge_requests
from assay.store import EvidenceStore

CALIBRATION_SUITE = "calibration"
"""The suite name calibration spend is budgeted and recorded under."""
_ASKED = {"input", "expected", "rubric", "output"}
"""The item fields the judge sees; with the output hashed, they key its cached verdict."""


def calibrate(
    store: EvidenceStore, setup: JudgeSetup, calibration_set: str, report_id: str
) -> CalibrationReport:
    """Judge every labelled item, measure the judge against the labels, record the report.

    Raises:
        InputError: No judge is configured, or the set is missing or malformed.
    """
    if setup.make_judge is None or setup.model is None or setup.prompt_version is None:
        raise InputError(
            "judge", f"{setup.skip_reason}: configure a judge to calibrate (see README, Judge)"
        )
    items = load_set(calibration_set)
    hasher = OutputHasher(store_secret(store))
    framed = {
        item.rubric: conversation_rubric(item.rubric) for item in items if item.on == "conversation"
    }
    if framed:
        versions = [version for rubric in framed.values() for version in rubric.versions]
        setup = replace(setup, prompt_version=with_texts(setup.prompt_version, versions))
    pin = JudgePin(model=setup.model, prompt_version=setup.prompt_version)
    requests = []
    for item in items:
        asked = item.model_dump(include=_ASKED) | {"rubric": _rubric(item, framed)}
        content = {**asked, "output": hasher(item.output)}
        request = JudgeRequest(case_id=item.item_id, **asked)
        requests.append((cache_key(hasher, "calibration", pin, content), request))
    judged = judge_requests(
        store,
        setup,
        requests,
        run_id=report_id,
        chunk=0,
        suite=CALIBRATION_SUITE,
        subject=f"judge:{setup.model}",
    )
    report = measure(
        items,
        judged.verdicts,
        report_id=report_id,
        targets=current_targets(store),
        judge=pin,
        calibration_set=calibration_set,
    )
    record_report(store, report)
    return report


def _rubric(item: CalibrationItem, framed: dict[str, ConversationRubric]) -> str:
    """The rubric the judge is asked with: a conversation item's is framed, as in a run."""
    return framed[item.rubric].text if item.on == "conversation" else item.rubric
