"""What one run's report page shows (`RunView`), read from stored records only (`load_view`).

The EvalResult, each case's verdicts (ids, statuses, scores, check labels: never output text),
the suite's tags and query classes, the comparison, the baseline's case verdicts and the judge's
latest calibration report. Figures that other parts of Assay add to the EvalResult later
(`trials`, `regression.minimum_detectable_drop`) are read from its JSON by name (`later_field`),
so the page shows them once they are recorded and shows nothing (never fails) before.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from operator import itemgetter
from typing import Any

from pydantic import BaseModel, ValidationError

from assay.admission.figures import judge_admission
from assay.admission.record import AdmissionState
from assay.calibration.report import CalibrationReport, reports
from assay.errors import NotFoundError
from assay.gate.decision import GateDecision, load_decision
from assay.gcpause import gc_paused
from assay.regression import CaseChange, Comparison, case_change
from assay.runs.chunks import CaseStatus, read_chunk, read_statuses
from assay.runs.comparison import case_verdicts, compare_with_baseline
from assay.runs.metrics import RunMetrics
from assay.runs.records import EvalResult, load_aggregate, load_result
from assay.runs.scoring import CaseEvidence
from assay.runs.trial_rule import decide_trials, verdict_over_trials
from assay.scorers import Status
from assay.store import EvidenceStore
from assay.suites import registry
from assay.suites.suite import TrialsPolicy


@dataclass(frozen=True)
class CaseInfo:
    """What the suite says about a case that a report may show: its tags and query class."""

    tags: tuple[str, ...] = ()
    query_class: str | None = None


NO_INFO = CaseInfo()
"""A case with neither tags nor a query class."""


class _KRate(BaseModel):
    rate: float
    lo: float | None = None
    hi: float | None = None
    method: str = ""


class Trials(BaseModel):
    """The EvalResult's `trials` figures, as far as a report reads them."""

    cases: int = 0
    trials: int = 0
    k_min: int | None = None
    k_max: int | None = None
    pass_rate: _KRate | None = None
    pass_at_k: dict[int, float] = {}
    pass_pow_k: dict[int, float] = {}
    flaky_cases: int = 0
    flaky: list[str] = []


def later_field(record: BaseModel | None, name: str) -> Any:
    """A field a later version of the record may carry, read from its JSON (None without)."""
    return None if record is None else record.model_dump(mode="json").get(name)


def trials_of(result: EvalResult) -> Trials | None:
    """The run's trial figures, when it recorded any in a shape this page reads."""
    found = later_field(result, "trials")
    if not found:
        return None
    try:
        return Trials.model_validate(found)
    except ValidationError:
        return None


MAX_CASE_ROWS = 2_000
"""Rows the case table holds: every case that did not pass or changed against the baseline
first, then passing ones, each in suite order. A 100,000-case page stays a few MB that a browser
opens at once, and building it keeps at most this many cases' evidence in memory; `assay runs
cases RUN_ID` and `GET /runs/{id}/cases` list every case."""


@dataclass
class RunView:
    """Everything the run page shows, read from the store."""

    result: EvalResult
    rows: list[CaseEvidence]
    """The case table's cases (at most `MAX_CASE_ROWS`, see there), in suite order; a run
    with trials: each case decided over its trials (`decide_trials`)."""
    cases: int
    """Every case of the run, listed in the table or not."""
    info: Mapping[str, CaseInfo]
    policy: TrialsPolicy | None = None
    """How the run decides a case over its trials; None for a run of one output per case."""
    trials: dict[str, list[CaseEvidence]] = field(default_factory=dict)
    """Each listed case's trials, in trial order (empty without trials)."""
    tags: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per tag: cases passed, scored."""
    classes: dict[str, tuple[int, int]] = field(default_factory=dict)
    """Per query class: cases passed, scored."""
    flipped: dict[CaseChange, list[str]] = field(default_factory=dict)
    """Case ids by their change against the baseline (empty without a baseline)."""
    comparison: Comparison | None = None
    baseline_verdicts: Mapping[str, bool] | None = None
    calibration: CalibrationReport | None = None
    gate: GateDecision | None = None
    """The gate's recorded decision, when the run went through the gate."""
    admission: AdmissionState | None = None
    """The run's judge's latest admission (None: the run used no judge)."""
    notes: list[str] = field(default_factory=list)

    @property
    def omitted(self) -> int:
        """Cases the table leaves out (passing and unchanged ones of a large run)."""
        return self.cases - len(self.rows)

    def change(self, case: CaseEvidence | CaseStatus) -> CaseChange:
        """The case against the baseline (`unchanged` when there is none to compare with)."""
        if self.baseline_verdicts is None:
            return "unchanged"
        now = None if case.status is Status.SKIPPED else case.status is Status.PASS
        return case_change(self.baseline_verdicts.get(case.case_id), now)


def load_view(
    store: EvidenceStore, run_id: str, against: str | None = None, *, cross_suite: bool = False
) -> RunView:
    """Read a finished run, compared with `against` (default: its recorded baseline; one of
    another suite only with `cross_suite`)."""
    result = load_result(store, run_id)
    aggregate = load_aggregate(store, run_id)
    _, golden = registry.resolve(store, f"{result.suite}@{result.suite_version}")
    # Only cases with something to show: the others read as `NO_INFO`.
    info = {
        case.id: CaseInfo(tuple(case.tags), case.query_class)
        for case in golden.cases
        if case.tags or case.query_class
    }
    comparison = result.regression
    if against is not None:
        comparison = compare_with_baseline(
            store,
            aggregate,
            result.metrics,
            golden.regression_threshold,
            against,
            cross_suite=cross_suite,
        )
    baseline = comparison.baseline_run if comparison is not None else None
    latest = reports(store, result.judge) if result.judge is not None else []
    view = RunView(
        result=result,
        rows=[],
        cases=0,
        info=info,
        policy=aggregate.trials_policy,
        comparison=comparison,
        baseline_verdicts=case_verdicts(store, baseline) if baseline else None,
        calibration=latest[-1] if latest else None,
        gate=_gate_decision(store, run_id),
        admission=None if result.judge is None else judge_admission(store, result.judge),
    )
    # Counts over every case are needed only for a comparison, groups or trials; without them
    # the run's own counts tell when the table's rows are all found (`_read_cases`).
    needs_every_case = view.baseline_verdicts is not None or info or view.policy is not None
    counted = None if needs_every_case else result.metrics
    with gc_paused():  # the records read are acyclic, and most are dropped at once
        _read_cases(view, store, run_id, aggregate.chunks, counted)
    return view


def _gate_decision(store: EvidenceStore, run_id: str) -> GateDecision | None:
    try:
        return load_decision(store, run_id)
    except NotFoundError:
        return None


Place = tuple[int, int]
"""Where one case's (or trial's) evidence is: its chunk and its position there."""


def _case_statuses(
    view: RunView, store: EvidenceStore, run_id: str, chunks: int
) -> Iterator[tuple[CaseStatus, tuple[Place, ...]]]:
    """Each case's status and where its evidence is, in evidence order: one chunk at a time,
    or for a run with trials, once every chunk is read, each case decided over its trials
    (`verdict_over_trials`: the same verdict the comparison and its flip table read)."""
    policy = view.policy
    if policy is None:
        for chunk in range(chunks):
            for position, case in enumerate(read_statuses(store, run_id, chunk)):
                yield case, ((chunk, position),)
        return
    trials: dict[str, list[tuple[Place, Status]]] = {}
    for chunk in range(chunks):
        for position, case in enumerate(read_statuses(store, run_id, chunk)):
            trials.setdefault(case.case_id, []).append(((chunk, position), case.status))
    for case_id, found in trials.items():
        scored = [status for _, status in found if status is not Status.SKIPPED]
        decided = verdict_over_trials(policy, len(scored), scored.count(Status.PASS))
        yield CaseStatus(case_id=case_id, status=decided), tuple(place for place, _ in found)


def _rows_settled(notable: int, passing: int, counted: RunMetrics) -> bool:
    """Whether the rows are chosen, with `notable` cases that did not pass and `passing` ones
    seen so far, of a run with these counts and no baseline (so no case changed)."""
    not_passed = counted.cases - counted.passed
    return notable >= MAX_CASE_ROWS or (
        notable == not_passed and passing >= MAX_CASE_ROWS - notable
    )


def _read_cases(
    view: RunView, store: EvidenceStore, run_id: str, chunks: int, counted: RunMetrics | None
) -> None:
    """The group pass rates, the changes against the baseline and the table's rows, in two
    passes over the evidence: every case's id and status first, then the whole evidence of the
    chunks that hold a row of the table (a 100,000-case run: 0.2 s and a few chunks, instead of
    1.2 s parsing every record). A run with trials counts, compares and lists cases, each
    decided over its trials, its trials kept beside it (`RunView.trials`).

    With the run's own counts (`counted`: a run with no comparison, groups or trials, where no
    count needs every case) the first pass stops as soon as the rows are settled: the table is
    full of cases that did not pass, or every one that did not pass is found and enough passing
    ones to fill it (a 100,000-case run with 10% failing: its first 20,000 cases)."""
    tags: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    classes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    notable: list[tuple[Place, ...]] = []
    passing: list[tuple[Place, ...]] = []
    for case, places in _case_statuses(view, store, run_id, chunks):
        view.cases += 1
        change = view.change(case)
        if change in ("newly failing", "newly passing"):
            view.flipped.setdefault(change, []).append(case.case_id)
        info = view.info.get(case.case_id, NO_INFO)
        if info is not NO_INFO and case.status is not Status.SKIPPED:
            groups = [tags[tag] for tag in info.tags]
            if info.query_class:
                groups.append(classes[info.query_class])
            for tally in groups:
                tally[0] += case.status is Status.PASS
                tally[1] += 1
        kept = passing if case.status is Status.PASS and change == "unchanged" else notable
        if len(kept) < MAX_CASE_ROWS:
            kept.append(places)
        if counted is not None and _rows_settled(len(notable), len(passing), counted):
            view.cases = counted.cases
            break
    listed = sorted(notable + passing[: max(MAX_CASE_ROWS - len(notable), 0)])
    read: dict[Place, CaseEvidence] = {}
    for chunk, rows in groupby(sorted(p for places in listed for p in places), key=itemgetter(0)):
        cases = read_chunk(store, run_id, chunk).cases
        read.update(((chunk, position), cases[position]) for _, position in rows)
    for places in listed:
        evidence = [read[place] for place in places]
        if view.policy is None:
            view.rows.extend(evidence)
            continue
        trials = sorted(evidence, key=lambda trial: trial.trial or 1)
        case_id = trials[0].case_id
        view.rows.append(decide_trials(case_id, trials, view.policy))
        view.trials[case_id] = trials
    view.tags = {k: (v[0], v[1]) for k, v in tags.items()}
    view.classes = {k: (v[0], v[1]) for k, v in classes.items()}
