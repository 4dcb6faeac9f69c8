"""A run's figures (`RunMetrics`, counted from case evidence by `tally`) and the run rule of
SPEC §5 (`run_verdict`) — in one place.

Run rule: score = mean case score over scored cases, pass_rate = passed / scored; coverage =
scored / (cases − not judged); the run passes when coverage reaches the suite's `min_coverage`
and then pass_rate >= pass_threshold. Coverage is checked first, so cases that drop out of the
denominator (a broken judge) can never let the rest decide; nothing scored never passes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from assay.error_bars import MeanEstimate, clustered_mean
from assay.runs.scoring import CaseEvidence
from assay.scorers import Status
from assay.scorers._registry import UNAVAILABLE
from assay.stats import Interval, wilson


class CheckTally(BaseModel):
    """One check kind's verdicts over a run: passed / scored, and the sum of its scores."""

    scored: int = 0
    passed: int = 0
    score_sum: float = 0.0

    @property
    def mean_score(self) -> float | None:
        """Mean score of the scored checks (a fraction for precision and recall)."""
        return self.score_sum / self.scored if self.scored else None


class TurnTally(BaseModel):
    """The scored turns of a run's conversation cases, in counts that merge chunk by chunk.

    A turn is scored when it passed, failed or errored (a missing turn fails; the unavailable
    turns after it, and turns not scored, are not counted). `shapes` counts conversations by
    their (scored turns, passed turns): all the cluster-robust estimator needs, since only
    which turns share a conversation matters, not which conversation it is. With trials, a
    conversation's trials are counted together (`nested_turns`): one cluster a conversation.
    """

    by_index: dict[str, list[int]] = Field(default_factory=dict)
    """Per turn index (`"1"`, `"2"`, …): [scored, passed] over the conversations (and trials)."""
    shapes: dict[str, int] = Field(default_factory=dict)
    """Conversations by `"<scored>/<passed>"` turns (over all their trials)."""
    index_shapes: dict[str, dict[str, int]] = Field(
        default_factory=dict, exclude_if=lambda shapes: not shapes
    )
    """With trials: per turn index, conversations by `"<scored>/<passed>"` trials of that turn
    (its interval clusters them too); left out without trials."""

    def add(self, other: TurnTally) -> None:
        for index, (scored, passed) in other.by_index.items():
            ours = self.by_index.setdefault(index, [0, 0])
            ours[0] += scored
            ours[1] += passed
        _add_shapes(self.shapes, other.shapes)
        for index, shapes in other.index_shapes.items():
            _add_shapes(self.index_shapes.setdefault(index, {}), shapes)

    def add_conversation(self, trials: Sequence[CaseEvidence], nested: bool) -> None:
        """Count one conversation's scored turns over its trials (one evidence without
        trials); `nested` keeps its per-index shapes too (a run with trials)."""
        at: dict[str, list[int]] = {}
        for trial in trials:
            for turn in trial.turns or ():
                if turn.status is Status.SKIPPED:
                    continue
                counts = at.setdefault(str(turn.turn), [0, 0])
                counts[0] += 1
                counts[1] += turn.status is Status.PASS
        if not at:
            return
        for index, (scored, passed) in at.items():
            ours = self.by_index.setdefault(index, [0, 0])
            ours[0] += scored
            ours[1] += passed
            if nested:
                _add_shapes(self.index_shapes.setdefault(index, {}), {f"{scored}/{passed}": 1})
        scored = sum(n for n, _ in at.values())
        passed = sum(c for _, c in at.values())
        _add_shapes(self.shapes, {f"{scored}/{passed}": 1})

    @property
    def conversations(self) -> int:
        """Conversations with at least one scored turn (the clusters)."""
        return sum(self.shapes.values())

    def turn_rate(self) -> MeanEstimate | None:
        """Passed / scored turns with the cluster-robust SE of Miller (2024) eq. 4
        (`assay.error_bars.clustered_mean`), conversations as the clusters; None with no turn."""
        return clustered_mean(*_items(self.shapes))

    def by_turn(self) -> list[tuple[int, int, int, Interval | None]]:
        """(turn index, scored, passed, 95% interval) per turn index, in order. Without trials
        one turn of a conversation is at each index, so the conversations are independent there:
        Wilson's interval. With trials of a conversation at an index, eq. 4's interval with the
        conversations as clusters (clipped to [0, 1])."""
        rows = []
        for index, (n, c) in sorted((int(i), counts) for i, counts in self.by_index.items()):
            shapes = self.index_shapes.get(str(index), {})
            interval = wilson(c, n)
            if any(not shape.startswith("1/") for shape in shapes):
                estimate = clustered_mean(*_items(shapes))
                interval = None if estimate is None else Interval(estimate.lo, estimate.hi)
            rows.append((index, n, c, interval))
        return rows


def _add_shapes(ours: dict[str, int], theirs: Mapping[str, int]) -> None:
    for shape, count in theirs.items():
        ours[shape] = ours.get(shape, 0) + count


def _items(shapes: Mapping[str, int]) -> tuple[list[float], list[str]]:
    """Each conversation's items (1.0 passed, 0.0 not) and their cluster, from its shape."""
    values: list[float] = []
    clusters: list[str] = []
    for shape, count in shapes.items():
        scored, passed = map(int, shape.split("/"))
        for copy in range(count):
            values += [1.0] * passed + [0.0] * (scored - passed)
            clusters += [f"{shape}#{copy}"] * scored
    return values, clusters


def nested_turns(by_case: Iterable[Sequence[CaseEvidence]]) -> TurnTally | None:
    """The turns of a run with trials, each conversation's trials taken together (one cluster a
    conversation, at every index too); None without a conversation case."""
    turns: TurnTally | None = None
    for trials in by_case:
        if any(trial.turns is not None for trial in trials):
            turns = turns or TurnTally()
            turns.add_conversation(trials, nested=True)
    return turns


class RunMetrics(BaseModel):
    """Every count a run reports. failed includes missing and error cases; skipped is apart."""

    cases: int = 0
    scored: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    missing: int = 0
    errors: int = 0
    incomplete: int = 0
    """Skipped cases with a check a configured judge could not score (against coverage)."""
    not_judged: int = 0
    """Skipped cases whose checks were all left out (no judge configured): outside coverage."""
    score_sum: float = Field(default=0.0, exclude=True)
    skipped_checks: int = 0
    """Individual scorer checks skipped (e.g. llm_judge with no judge), excluded from scores."""
    judge_calls: int = 0
    """Judge requests sent (cache hits excluded)."""
    judge_cache_hits: int = 0
    judge_cost_usd: float = 0.0
    judged_checks: int = 0
    """`llm_judge` checks with a pass/fail verdict (N of the judge-corrected pass rate)."""
    judged_checks_passed: int = 0
    """How many of them the judge passed."""
    repeated_checks: int = 0
    """With `--judge-repeats K > 1`: checks with K pass/fail verdicts (flip-rate denominator)."""
    unanimous_checks: int = 0
    """Of those, checks whose K verdicts agreed."""
    split_checks: int = 0
    """Checks whose repeats split evenly (skipped, `judge split`)."""
    judge_calls_over_bound: int = 0
    """Judge calls that reported more output tokens than `max_tokens` allows (recorded as is)."""
    write_guard: str | None = None
    """How the evidence store kept writes write-once for this run (see EvidenceStore)."""
    checks_by_kind: dict[str, CheckTally] = Field(default_factory=dict)
    """Per check kind: how many checks were scored (not skipped) and passed."""
    unavailable: dict[str, int] = Field(default_factory=dict)
    """Checks whose evidence the record did not capture, by `KIND: why` (e.g. `tool_errors:
    OpenAI messages cannot mark a failed call`): skipped, and against coverage."""
    turns: TurnTally | None = Field(default=None, exclude_if=lambda turns: turns is None)
    """The turns of conversation cases (docs/conversations.md); None without any."""

    def merge(self, other: RunMetrics) -> None:
        """Add another tally (e.g. one chunk's) into this one."""
        for name in type(self).model_fields:
            value = getattr(self, name)
            if isinstance(value, int | float):
                setattr(self, name, value + getattr(other, name))
        for why, count in other.unavailable.items():
            self.unavailable[why] = self.unavailable.get(why, 0) + count
        for kind, theirs in other.checks_by_kind.items():
            ours = self.checks_by_kind.setdefault(kind, CheckTally())
            ours.scored += theirs.scored
            ours.passed += theirs.passed
            ours.score_sum += theirs.score_sum
        if other.turns is not None:
            if self.turns is None:
                self.turns = TurnTally()
            self.turns.add(other.turns)

    @property
    def score(self) -> float | None:
        """Mean case score over scored cases; None when nothing was scored."""
        return self.score_sum / self.scored if self.scored else None

    @property
    def pass_rate(self) -> float | None:
        """passed / scored; None when nothing was scored (never a silent 0 or 1)."""
        return self.passed / self.scored if self.scored else None

    @property
    def coverable(self) -> int:
        """Cases that count for coverage: all but those left out for want of a judge."""
        return self.cases - self.not_judged

    @property
    def coverage(self) -> float | None:
        """scored / coverable cases (missing cases count as scored: they failed); None with none."""
        return self.scored / self.coverable if self.coverable else None

    def coverage_text(self) -> str:
        """`18/20`, with `(+ 6 not judged)` when cases were left out for want of a judge."""
        left_out = f" (+ {self.not_judged} not judged)" if self.not_judged else ""
        return f"{self.scored}/{self.coverable}{left_out}"


def run_verdict(
    metrics: RunMetrics, pass_threshold: float, min_coverage: float
) -> tuple[bool, str | None]:
    """The run rule: (passed, why not). Coverage first, then the pass rate.

    The reason is None for a passing run, else one line with both numbers, e.g.
    `coverage 1/5 below 0.95` or `pass rate 36/50 below 0.8`.
    """
    if not metrics.cases:
        return False, "no cases"
    coverage = metrics.coverage
    if coverage is None:
        return False, f"nothing was scored ({metrics.not_judged} case(s) not judged: no judge)"
    if coverage < min_coverage:
        return False, f"coverage {metrics.coverage_text()} below {min_coverage:g}"
    pass_rate = metrics.pass_rate
    if pass_rate is None:
        return False, "nothing was scored"
    if pass_rate < pass_threshold:
        return False, f"pass rate {metrics.passed}/{metrics.scored} below {pass_threshold:g}"
    return True, None


def tally(cases: Iterable[CaseEvidence]) -> RunMetrics:
    """Count a batch of case evidence (in local variables: a pydantic attribute update costs
    about a microsecond, and a case made some twenty)."""
    n = passed = failed = skipped = not_judged = missing = errors = skipped_checks = 0
    score_sum = 0.0
    kinds: dict[str, list[float]] = {}
    unavailable: dict[str, int] = {}
    turns: TurnTally | None = None
    for case in cases:
        if case.turns is not None:
            turns = turns or TurnTally()
            turns.add_conversation((case,), nested=False)
        for check in case.checks:
            if check.status is Status.SKIPPED:
                skipped_checks += 1
                if check.reason.startswith(UNAVAILABLE):
                    why = f"{check.kind}: {check.reason.removeprefix(UNAVAILABLE)}"
                    unavailable[why] = unavailable.get(why, 0) + 1
            elif check.kind is not None:
                kind = kinds.get(check.kind)
                if kind is None:
                    kind = kinds[check.kind] = [0, 0, 0.0]
                kind[0] += 1
                kind[1] += check.status is Status.PASS
                kind[2] += check.score
        n += 1
        if case.status is Status.SKIPPED:
            skipped += 1
            not_judged += case.not_judged
        elif case.status is Status.PASS:
            passed += 1
            score_sum += case.score or 0.0
        else:
            failed += 1
            score_sum += case.score or 0.0
            missing += case.missing
            errors += case.status is Status.ERROR
    return RunMetrics(
        cases=n,
        scored=passed + failed,
        passed=passed,
        failed=failed,
        skipped=skipped,
        not_judged=not_judged,
        incomplete=skipped - not_judged,
        missing=missing,
        errors=errors,
        skipped_checks=skipped_checks,
        score_sum=score_sum,
        checks_by_kind={
            name: CheckTally(scored=int(count), passed=int(hits), score_sum=total)
            for name, (count, hits, total) in kinds.items()
        },
        unavailable=unavailable,
        turns=turns,
    )
