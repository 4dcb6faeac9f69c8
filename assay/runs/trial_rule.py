"""The trial rule: a case decided over its repeated trials (`TrialsPolicy`: at least `min`
scored trials, `case_passes` all / majority / any), and the verdict a comparison reads of it."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from assay.runs.scoring import CaseEvidence, no_output
from assay.scorers import Status, clamp
from assay.suites.suite import CasePasses, TrialsPolicy

TRIALS_LABEL = re.compile("trials passed")
"""What a case label decided over trials says (JUnit tells such a case by it)."""


def decide_trials(
    case_id: str, trials: Sequence[CaseEvidence], policy: TrialsPolicy
) -> CaseEvidence:
    """One case's verdict over its trials (the trial rule, see `TrialsPolicy`).

    Each trial is decided by the case rule above. Of the n scored trials (passed, failed or
    errored), c passed. The case passes when n ≥ `policy.min` and `policy.case_passes` holds
    (`all`: c = n; `majority`: c > n/2; `any`: c ≥ 1). It fails when the policy cannot hold even
    if each of the trials still wanting (up to `min`) passed — so with no output at all it is
    failed and `missing`. Otherwise it is `skipped` and incomplete (too few scored trials:
    coverage, not a pass); when no trial was scored because no judge is configured, `not_judged`.
    Its score is the mean score of its scored trials. The label counts trials, never text.
    """
    if not trials or all(t.missing for t in trials):
        return no_output(case_id)
    scored = [t for t in trials if t.status is not Status.SKIPPED]
    n, c = len(scored), sum(t.status is Status.PASS for t in scored)
    wanting = max(policy.min - n, 0)
    status = verdict_over_trials(policy, n, c)
    if status is Status.FAIL and any(t.status is Status.ERROR for t in scored):
        status = Status.ERROR
    not_judged = status is Status.SKIPPED and not scored and all(t.not_judged for t in trials)
    label = f"{c}/{n} {TRIALS_LABEL.pattern} ({policy.case_passes})"
    if wanting:
        label += f"; {n} of {policy.min} trials scored"
    return CaseEvidence(
        case_id=case_id,
        status=status,
        score=None if status is Status.SKIPPED else math.fsum(t.score or 0.0 for t in scored) / n,
        not_judged=not_judged,
        output_hmac=None,
        label=clamp(label),
        checks=[],
    )


def verdict_over_trials(policy: TrialsPolicy, n: int, c: int) -> Status:
    """PASS, FAIL or SKIPPED (too few scored trials to tell) of a case with n scored trials, c
    of them passed, under the trial rule of `decide_trials`."""
    wanting = max(policy.min - n, 0)
    if n >= policy.min and _holds(policy.case_passes, c, n):
        return Status.PASS
    if not _holds(policy.case_passes, c + wanting, n + wanting):
        return Status.FAIL
    return Status.SKIPPED


def _holds(policy: CasePasses, passed: int, n: int) -> bool:
    if policy == "all":
        return n > 0 and passed == n
    if policy == "majority":
        return 2 * passed > n
    return passed >= 1
