"""Scoring: cases against outputs, and the case and trial rules of SPEC §5 — in one place.

Case rule (coverage by checks): a case passes only when every check it carries was scored and
passed. A check is *left out* when no judge is configured at all (`no judge configured`, `no
credentials`: declared, not a failure); any other skipped check (a configured judge's errors past
retries, a malformed reply, a blocked budget, a split vote) leaves it *unscored*. Then, in order:
a case with no output is failed ("no output", counted `missing`); a scored check that failed (or
errored) fails the case, whatever the unscored ones would have said; a case with an unscored check
is `skipped` (incomplete: it counts against coverage, never as passed); a case whose checks all
ran passes; a case whose checks were all left out is `skipped` and `not_judged`. Its score is the
mean of the scored checks.

The run rule over the cases' evidence: `assay.runs.metrics`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from assay.hashing import OutputHasher
from assay.judge.port import NO_CREDENTIALS, NO_JUDGE
from assay.outputs.candidate import CandidateOutput
from assay.runs.conversations import (
    TURN_JUDGE_UNAVAILABLE,
    TurnStanding,
    deciding,
    joined,
    no_turn,
    policy_score,
    policy_status,
    policy_words,
    turn_observations,
    turn_prefix,
    whole_conversation,
)
from assay.scorers import PASS, Observation, Outcome, Scorer, ScorerSpec, Status, clamp
from assay.scorers._registry import UNAVAILABLE
from assay.suites.suite import Case, Suite

NO_OUTPUT = "no output"
"""What the label of a case decided over its trials says (`3/5 trials passed (all)`)."""
LEFT_OUT: frozenset[str] = frozenset({NO_JUDGE, NO_CREDENTIALS})
"""Skip reasons of a judged check with no judge configured at all: the check is left out (a
declared warning), not unscored."""


class CheckResult(BaseModel):
    """One scorer's verdict on one case (label from configuration, never from the output)."""

    model_config = ConfigDict(frozen=True)  # a shared scorer's passing check is one object

    scorer: str
    status: Status
    score: float
    kind: str | None = None
    """The check's family (`trajectory`, `contains`, …); None in evidence written before."""
    reason: str = Field(default="", max_length=120)
    """Why it did not pass (`missing refund`), from configuration and tool names only."""


class TurnVerdict(BaseModel):
    """One turn of a conversation case (docs/conversations.md): its verdict and check labels,
    never its text."""

    turn: int = Field(ge=1)
    """The turn's index in the case, from 1."""
    status: Status
    score: float | None
    """The mean of its scored checks; None when none was scored; 0 for a missing turn."""
    label: str = Field(max_length=120)
    """`2 checks passed`, the failing checks (`contains "A-1042": missing`), `no turn 3` (the
    record ended before it), `unavailable: no turn 3` (a later turn of such a record)."""
    missing: bool = Field(default=False, exclude_if=lambda missing: not missing)
    """The record holds no such turn: the first missing turn fails, the later ones are skipped."""
    checks: list[CheckResult] = []


class CaseEvidence(BaseModel):
    """Per-case evidence: verdicts, a keyed hash of the output, and a redacted label."""

    case_id: str
    status: Status
    score: float | None
    missing: bool = False
    not_judged: bool = False
    """Every check of the case was a judged check left out for want of a judge."""
    output_hmac: str | None
    label: str = Field(max_length=120)
    checks: list[CheckResult]
    trial: int | None = Field(default=None, exclude_if=lambda trial: trial is None)
    """Which trial of the case this evidence is (outputs with `trial`); left out without one, so
    single-trial evidence keeps its bytes."""
    turns: list[TurnVerdict] | None = Field(default=None, exclude_if=lambda turns: turns is None)
    """A conversation case's verdict per turn of the suite's case, in order (`checks` then holds
    its conversation-level checks); left out for a one-answer case, which keeps its bytes."""
    record_turns: int | None = Field(default=None, exclude_if=lambda count: count is None)
    """How many turns the record held (more than the case's: the extra ones are not scored)."""


SHARED_SCORERS = 4096
"""Compiled scorers that several cases share, kept between cases: more than a suite's few
`contains`/`regex` checks (compiled again once per this many, should a suite share more)."""


class CaseScorers(Mapping[str, tuple[Scorer, ...]]):
    """Each case's compiled scorers by case id, compiled when a chunk asks for them.

    Compiling the whole suite up front kept one scorer per distinct configuration alive for the
    run: 100,000 of them for a suite whose cases each have their own `numeric_range` bounds. A
    scorer that several cases share is compiled once and kept (up to `SHARED_SCORERS`); one
    that only its case uses is compiled when the case is scored and let go with its chunk.
    Compiling is deterministic, so a scorer compiled twice scores the same.
    """

    def __init__(self, suite: Suite, cases: Mapping[str, Case], shared: frozenset[int]) -> None:
        self._suite = suite
        self._cases = cases
        # By the spec's identity: identical scorer entries validate to one shared spec
        # (`ScorerSpec`); the suite holds its specs and each entry its own, so no id is reused.
        self._shared = shared
        self._built: dict[int, tuple[ScorerSpec, Scorer]] = {}
        self.passed: dict[Scorer, CheckResult] = {}
        """The passing check of each shared scorer kept, built once: most cases pass most
        checks, and a case's evidence validates faster with the check built than as data."""

    def __getitem__(self, case_id: str) -> tuple[Scorer, ...]:
        case = self._cases[case_id]
        return tuple(
            [
                spec.build(case.reference)  # bound to this case's expected trajectory
                if spec.needs_reference
                else self._compiled(spec)
                for spec in self._suite.scorers_for(case)
            ]
        )

    def turns(self, case_id: str) -> tuple[tuple[Scorer, ...], ...]:
        """Each turn's compiled scorers of a conversation case, in order."""
        return tuple(
            tuple(
                spec.build(turn.reference) if spec.needs_reference else self._compiled(spec)
                for spec in self._suite.turn_scorers(turn)
            )
            for turn in self._cases[case_id].turns or ()
        )

    def _compiled(self, spec: ScorerSpec) -> Scorer:
        key = id(spec)
        if key not in self._shared:
            return spec.build()
        found = self._built.get(key)
        if found is not None:
            return found[1]
        built = spec.build()
        if len(self._built) >= SHARED_SCORERS:
            self._built.clear()
            self.passed.clear()
        self._built[key] = (spec, built)
        self.passed[built] = CheckResult(
            scorer=built.label, status=PASS.status, score=PASS.score, kind=built.name, reason=""
        )
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(self._cases)

    def __len__(self) -> int:
        return len(self._cases)


@dataclass
class CompiledSuite:
    """A suite ready to score: its cases by id and their scorers (`CaseScorers`)."""

    suite: Suite
    cases: dict[str, Case]
    scorers: CaseScorers
    judged: bool = False
    """Whether any case has an `llm_judge` check (only then is a judge configured)."""

    @classmethod
    def compile(cls, suite: Suite) -> CompiledSuite:
        """Index the cases by id and find the scorers cases share; each case's scorers
        (defaults for cases that list none) compile as the case is scored."""
        cases = {case.id: case for case in suite.cases}
        specs = [spec for case in suite.cases for spec in suite.scorers_for(case)]
        turn_specs = [
            spec
            for case in suite.cases
            for turn in case.turns or ()
            for spec in suite.turn_scorers(turn)
        ]
        uses = Counter(map(id, specs + turn_specs))
        shared = frozenset(key for key, count in uses.items() if count > 1)
        judged = any(spec.name == "llm_judge" for spec in specs)
        return cls(suite, cases, CaseScorers(suite, cases, shared), judged)


def _label(outcomes: list[tuple[Scorer, Outcome]]) -> str:
    failing = [
        f"{s.label}: {o.reason}" for s, o in outcomes if o.status in (Status.FAIL, Status.ERROR)
    ]
    if failing:
        return clamp("; ".join(failing))
    skipped = [o.reason for _, o in outcomes if o.status is Status.SKIPPED]
    unscored = [reason for reason in skipped if reason not in LEFT_OUT]
    ran = len(outcomes) - len(skipped)
    if unscored:
        text = f"incomplete: {len(unscored)} check{'s' if len(unscored) != 1 else ''} not scored"
    elif ran:
        text = _all_passed(ran)
    else:
        text = "all checks skipped"
    if skipped:
        text += f"; {len(skipped)} skipped ({', '.join(sorted(set(skipped)))})"
    return clamp(text)


def _all_passed(ran: int) -> str:
    """`_label` of a case whose checks all ran and passed."""
    return f"{ran} check{'s' if ran != 1 else ''} passed"


def no_output(case_id: str) -> CaseEvidence:
    return CaseEvidence(
        case_id=case_id,
        status=Status.FAIL,
        score=0.0,
        missing=True,
        output_hmac=None,
        label=NO_OUTPUT,
        checks=[],
    )


@dataclass(slots=True)
class _Checked:
    """The case rule over one set of outcomes (a case's, or one turn's)."""

    checks: list[CheckResult | dict[str, Any]]
    status: Status
    score: float | None
    label: str
    not_judged: bool


def _checked(
    outcomes: list[tuple[Scorer, Outcome]], passed: Mapping[Scorer, CheckResult] | None
) -> _Checked:
    # One pass over the outcomes for the verdict and the checks (as plain dicts: one validation
    # of the case with its checks costs less than building each `CheckResult` first — unless
    # it is built already, `passed`).
    checks: list[CheckResult | dict[str, Any]] = []
    total = 0.0
    counted = 0
    failed = errored = unscored = False
    for scorer, outcome in outcomes:
        if outcome.status is Status.SKIPPED:
            unscored = unscored or outcome.reason not in LEFT_OUT
        else:
            total += outcome.score
            counted += 1
            failed = failed or outcome.status is Status.FAIL
            errored = errored or outcome.status is Status.ERROR
        built = passed.get(scorer) if outcome is PASS and passed else None
        if built is not None:
            checks.append(built)
            continue
        checks.append(
            {
                "scorer": scorer.label,
                "status": outcome.status,
                "score": outcome.score,
                "kind": scorer.name,
                "reason": clamp(outcome.reason),
            }
        )
    score = total / counted if counted else None
    if errored:
        status = Status.ERROR
    elif failed:
        status = Status.FAIL
    elif unscored or not counted:
        status, score = Status.SKIPPED, None
    else:
        status = Status.PASS
    label = (
        _all_passed(counted)
        if status is Status.PASS and counted == len(outcomes)
        else _label(outcomes)
    )
    not_judged = status is Status.SKIPPED and not unscored and bool(outcomes)
    return _Checked(checks, status, score, label, not_judged)


def score_case(
    case_id: str,
    scorers: tuple[Scorer, ...],
    output: CandidateOutput | None,
    hasher: OutputHasher,
    judged: Mapping[tuple[str, int], Outcome] | None = None,
    passed: Mapping[Scorer, CheckResult] | None = None,
) -> CaseEvidence:
    """Score one case under the SPEC §5 case rule.

    `judged` holds the outcomes of checks decided elsewhere (the judge), by (case id, position);
    the other checks run here. `passed` holds, for some scorers, their passing check already
    built (`CaseScorers.passed`).
    """
    if output is None:
        return no_output(case_id)
    text = output.output
    observed = Observation(text, output.trajectory, output.unseen)
    checked = _checked(_outcomes(case_id, scorers, observed, judged), passed)
    return CaseEvidence.model_validate(
        {
            "case_id": case_id,
            "trial": output.trial,
            "status": checked.status,
            "score": checked.score,
            "missing": False,
            "not_judged": checked.not_judged,
            "output_hmac": hasher(text),
            "label": checked.label,
            "checks": checked.checks,
        }
    )


def _outcomes(
    case_id: str,
    scorers: tuple[Scorer, ...],
    observed: Observation,
    judged: Mapping[tuple[str, int], Outcome] | None,
) -> list[tuple[Scorer, Outcome]]:
    if judged:
        return [
            (scorer, judged.get((case_id, position)) or scorer(observed))
            for position, scorer in enumerate(scorers)
        ]
    return [(scorer, scorer(observed)) for scorer in scorers]


def score_conversation(
    case: Case,
    scorers: CaseScorers,
    output: CandidateOutput | None,
    hasher: OutputHasher,
    judged: Mapping[tuple[str, int], Outcome] | None = None,
) -> CaseEvidence:
    """Score a conversation case under the conversation rule (`assay.runs.conversations`):
    each turn of the record against its turn of the case, the case's own checks against the
    whole record, and the case decided by its `conversation_passes` policy and those checks."""
    assert case.turns is not None
    observed = () if output is None else turn_observations(output)
    count = len(case.turns)
    turns: list[dict[str, Any]] = []
    standings: list[TurnStanding] = []
    for index, turn_scorers in enumerate(scorers.turns(case.id)):
        number = index + 1
        if index >= len(observed):
            at_end = index == len(observed)
            reason = no_turn(len(observed) + 1)
            turns.append(
                {
                    "turn": number,
                    "status": Status.FAIL if at_end else Status.SKIPPED,
                    "score": 0.0 if at_end else None,
                    "label": reason if at_end else UNAVAILABLE + reason,
                    "missing": True,
                }
            )
            standings.append(TurnStanding(False, 0.0))
            continue
        outcomes = [
            (
                scorer,
                TURN_JUDGE_UNAVAILABLE if scorer.name == "llm_judge" else scorer(observed[index]),
            )
            for scorer in turn_scorers
        ]
        checked = _checked(outcomes, scorers.passed)
        turns.append(
            {
                "turn": number,
                "status": checked.status,
                "score": checked.score,
                "label": checked.label,
                "checks": checked.checks,
            }
        )
        scored = checked.status is not Status.SKIPPED
        standings.append(
            TurnStanding(checked.status is Status.PASS if scored else None, checked.score)
        )
    if output is None:
        return no_output(case.id).model_copy(
            update={"turns": [TurnVerdict.model_validate(turn) for turn in turns]}
        )
    whole = whole_conversation(output, len(observed))
    conversation = _checked(_outcomes(case.id, scorers[case.id], whole, judged), scorers.passed)
    policy = case.conversation_passes
    by_policy = policy_status(policy, standings)
    read = deciding(policy, count)
    errored = any(turns[i]["status"] is Status.ERROR for i in read)
    statuses = {by_policy, conversation.status} if conversation.checks else {by_policy}
    if Status.ERROR in statuses or (by_policy is Status.FAIL and errored):
        status = Status.ERROR
    elif Status.FAIL in statuses:
        status = Status.FAIL
    elif Status.SKIPPED in statuses:
        status = Status.SKIPPED
    else:
        status = Status.PASS
    failing = next((i for i in read if turns[i]["status"] in (Status.FAIL, Status.ERROR)), None)
    first = (
        f"{turn_prefix(failing + 1, count)}: {turns[failing]['label']}"
        if failing is not None and by_policy is Status.FAIL
        else ""
    )
    extra = len(observed) - count
    if status is Status.PASS:
        passed_turns = sum(t.passed is True for t in standings)
        label = joined(
            policy_words(policy, standings) or f"{passed_turns} of {count} turns passed",
            conversation.label if conversation.checks else "",
            f"{extra} extra turn{'s' if extra != 1 else ''} not scored" if extra > 0 else "",
        )
    elif status is Status.SKIPPED:
        unscored = next((i for i, t in enumerate(standings) if t.passed is None), None)
        label = joined(
            f"incomplete: {turn_prefix(unscored + 1, count)}: {turns[unscored]['label']}"
            if unscored is not None and by_policy is Status.SKIPPED
            else "",
            conversation.label if conversation.status is Status.SKIPPED else "",
        )
    else:
        label = joined(
            first,
            policy_words(policy, standings) if by_policy is Status.FAIL else "",
            conversation.label if conversation.status in (Status.FAIL, Status.ERROR) else "",
        )
    return CaseEvidence.model_validate(
        {
            "case_id": case.id,
            "trial": output.trial,
            "status": status,
            "score": None if status is Status.SKIPPED else policy_score(policy, standings),
            "missing": False,
            "not_judged": False,
            "output_hmac": hasher(output.output),
            "label": label,
            "checks": conversation.checks,
            "turns": turns,
            "record_turns": len(observed),
        }
    )


def score_outputs(
    compiled: CompiledSuite,
    outputs: Iterable[CandidateOutput],
    hasher: OutputHasher,
    judged: Mapping[tuple[str, int], Outcome] | None = None,
) -> list[CaseEvidence]:
    """Score a stream of outputs (each for a case of the suite)."""
    scorers = compiled.scorers
    cases = compiled.cases
    return [
        score_case(o.case_id, scorers[o.case_id], o, hasher, judged, scorers.passed)
        if cases[o.case_id].turns is None
        else score_conversation(cases[o.case_id], scorers, o, hasher, judged)
        for o in outputs
    ]


def score_missing(compiled: CompiledSuite, case_ids: Iterable[str]) -> list[CaseEvidence]:
    """Evidence for selected cases that have no output: failed, "no output", counted missing."""
    unused = OutputHasher(b"")
    scorers, cases = compiled.scorers, compiled.cases
    return [
        score_case(case_id, scorers[case_id], None, unused)
        if cases[case_id].turns is None
        else score_conversation(cases[case_id], scorers, None, unused)
        for case_id in case_ids
    ]
