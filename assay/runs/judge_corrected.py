"""The judge-corrected paired difference of two runs, from a calibration set's human labels.

A calibration item labels one `llm_judge` check of one case's output (item id
`<case id>#<check position>@<digest>`). It is matched to a run's case when the case id and the
check position agree and the keyed hash of the item's output equals the case's `output_hmac`
(the evidence keeps no output text). A case's *human verdict* in a run is its verdict under the
case rule with each judged check's status replaced by people's label; it is known when every
judged check of the case has a matching label. The shared cases whose human verdict is known in
both runs are the labelled sample of `assay.ppi.ppi_paired_difference`, the other shared cases
its unlabelled one (docs/EVAL-METHODOLOGY.md, "Judge-corrected paired differences").

Not matched, so never labelled: turn items and items on a trajectory or a conversation (the
evidence hashes a case's final answer only), and outputs longer than the set keeps
(`CONTENT_LIMIT`: the clamped text hashes differently). Assumption, as for one run: the
labelled cases are a random sample of the shared cases.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from assay.calibration.labels import load_set
from assay.calibration.report import MIN_JUDGED
from assay.corrected_difference import CorrectedDifference, DifferenceCorrection
from assay.error_bars import paired_mean_diff
from assay.hashing import OutputHasher, store_secret
from assay.runs.chunks import read_cases
from assay.runs.scoring import CaseEvidence
from assay.scorers import Status
from assay.store import EvidenceStore

_JUDGE = "llm_judge"

_Labels = Mapping[tuple[str, int, str], bool]
"""People's pass (True) or fail by (case id, check position, output hmac)."""


def _labels(store: EvidenceStore, calibration_set: str) -> dict[tuple[str, int, str], bool]:
    hasher = OutputHasher(store_secret(store))
    labels: dict[tuple[str, int, str], bool] = {}
    for item in load_set(calibration_set):
        _, _, position = item.item_id.split("@", 1)[0].rpartition("#")
        whole_answer = item.case_id is not None and item.turn is None and item.on == "output"
        if not (whole_answer and position.isdigit()):
            continue
        labels[(str(item.case_id), int(position), hasher(item.output))] = item.label == "pass"
    return labels


def _human_verdict(case: CaseEvidence, labels: _Labels) -> bool | None:
    """The case's verdict with its judged checks decided by people; None unless every judged
    check it scored has a label for this very output."""
    if case.output_hmac is None or case.turns is not None:
        return None
    judged = [
        (position, check)
        for position, check in enumerate(case.checks)
        if check.kind == _JUDGE and check.status is not Status.SKIPPED
    ]
    if not judged:
        return None
    found = [labels.get((case.case_id, position, case.output_hmac)) for position, _ in judged]
    if any(label is None for label in found):
        return None
    others_pass = all(
        check.status not in (Status.FAIL, Status.ERROR)
        for check in case.checks
        if check.kind != _JUDGE
    )
    return others_pass and all(found)


def _side(cases: Iterable[CaseEvidence], labels: _Labels) -> dict[str, tuple[bool, bool | None]]:
    """(the run's verdict, the human verdict or None) of each decided case."""
    return {
        case.case_id: (case.status is Status.PASS, _human_verdict(case, labels))
        for case in cases
        if case.status is not Status.SKIPPED
    }


def _vector(values: Iterable[bool]) -> np.ndarray:
    return np.fromiter(values, dtype=float)


def correct_difference(
    store: EvidenceStore, calibration_set: str, baseline_run: str, candidate_run: str
) -> DifferenceCorrection:
    """The PPI++ paired difference baseline − candidate of two runs without trials.

    Raises:
        InputError: The set cannot be read.
    """
    from assay.ppi import PairedArm, ppi_paired_difference  # numpy and scipy: paid on request

    labels = _labels(store, calibration_set)
    first = _side(read_cases(store, baseline_run), labels)
    second = _side(read_cases(store, candidate_run), labels)
    shared = [case_id for case_id in second if case_id in first]
    both = [c for c in shared if first[c][1] is not None and second[c][1] is not None]
    one_side = sum((first[c][1] is None) != (second[c][1] is None) for c in shared)
    labelled = set(both)
    rest = [c for c in shared if c not in labelled]
    if len(both) < MIN_JUDGED or not rest:
        return DifferenceCorrection(
            warning=f"judge_corrected: {len(both)} shared case(s) have labels in {calibration_set} "
            f"for both runs' outputs ({one_side} for one run only) and {len(rest)} have none; "
            f"at least {MIN_JUDGED} and 1 are needed (label both runs' outputs with `assay label`)"
        )
    baseline, candidate = (
        PairedArm(
            labels=_vector(bool(side[c][1]) for c in both),
            predictions=_vector(side[c][0] for c in both),
            unlabelled=_vector(side[c][0] for c in rest),
        )
        for side in (first, second)
    )
    result = ppi_paired_difference(baseline, candidate)
    raw = paired_mean_diff(
        [float(first[c][0]) for c in shared], [float(second[c][0]) for c in shared]
    )
    assert raw is not None  # more than MIN_JUDGED shared cases
    return DifferenceCorrection(
        corrected=CorrectedDifference(
            estimate=result.estimate,
            interval=[result.lo, result.hi],
            judge_diff=raw.mean,
            judge_interval=[raw.lo, raw.hi],
            labelled=result.labelled,
            unlabelled=result.unlabelled,
            lambda_=result.lam,
            labelled_one_side=one_side,
        )
    )
