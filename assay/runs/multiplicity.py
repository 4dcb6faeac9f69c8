"""The regression tests a set of finished runs made (a nightly's jobs), read from the store and
adjusted as two families (`assay.multiplicity`): one test per run against its baseline, and one
per slice both runs scored — tag (cases), check kind (checks) and turn index (turns of
conversations, runs without trials: one turn of each conversation per index)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from assay.multiplicity import DropTest, Family, Scope, families, slice_tests, suite_test
from assay.runs.comparison import case_verdicts
from assay.runs.records import EvalResult, load_result
from assay.store import EvidenceStore
from assay.suites import registry
from assay.suites.suite import Suite


def family_test_id(result: EvalResult) -> str:
    """`SUITE@VERSION · SUBJECT`: how a run's test is named in its family."""
    return f"{result.suite}@{result.suite_version} · {result.subject}"


def _by_tag(suite: Suite, verdicts: Mapping[str, bool]) -> dict[str, tuple[int, int]]:
    counts: dict[str, list[int]] = {}
    for case in suite.cases:
        verdict = verdicts.get(case.id)
        if verdict is None:
            continue
        for tag in case.tags:
            tally = counts.setdefault(tag, [0, 0])
            tally[0] += verdict
            tally[1] += 1
    return {tag: (passed, scored) for tag, (passed, scored) in counts.items()}


def _by_kind(result: EvalResult) -> dict[str, tuple[int, int]]:
    return {k: (t.passed, t.scored) for k, t in result.metrics.checks_by_kind.items()}


def _by_turn(result: EvalResult) -> dict[str, tuple[int, int]] | None:
    """Turn counts by index; None with trials (a conversation's trials share an index)."""
    turns = result.metrics.turns
    if turns is None or result.trials is not None or turns.index_shapes:
        return None
    return {index: (passed, scored) for index, (scored, passed) in turns.by_index.items()}


def run_tests(store: EvidenceStore, result: EvalResult) -> tuple[DropTest, bool, list[DropTest]]:
    """A compared run's suite test, whether its suite is a primary comparison, and its slices.

    Raises:
        ValueError: If the run has no baseline (it made no test).
    """
    name = family_test_id(result)
    comparison = result.regression
    found = None if comparison is None else suite_test(name, result.run_id, comparison)
    if found is None or comparison is None or comparison.baseline_run is None:
        raise ValueError(f"run {result.run_id} was not compared with a baseline")
    baseline = load_result(store, comparison.baseline_run)
    _, suite = registry.resolve(store, f"{result.suite}@{result.suite_version}")
    slices = [
        *slice_tests(
            name,
            result.run_id,
            baseline.run_id,
            Scope.TAG,
            _by_tag(suite, case_verdicts(store, baseline.run_id)),
            _by_tag(suite, case_verdicts(store, result.run_id)),
        ),
        *slice_tests(
            name,
            result.run_id,
            baseline.run_id,
            Scope.CHECK_KIND,
            _by_kind(baseline),
            _by_kind(result),
        ),
    ]
    turns_before, turns_now = _by_turn(baseline), _by_turn(result)
    if turns_before is not None and turns_now is not None:
        slices += slice_tests(
            name, result.run_id, baseline.run_id, Scope.TURN, turns_before, turns_now
        )
    return found, suite.primary_comparison, slices


def compared(results: Iterable[EvalResult]) -> list[EvalResult]:
    """The runs that made a regression test (were compared with a baseline)."""
    return [
        result
        for result in results
        if result.regression is not None and result.regression.baseline_run is not None
    ]


def night_families(store: EvidenceStore, results: Sequence[EvalResult]) -> tuple[Family, Family]:
    """The regressions and slices families of these runs, adjusted (runs without a baseline
    made no test and are left out)."""
    suites: list[tuple[DropTest, bool]] = []
    slices: list[DropTest] = []
    for result in compared(results):
        test, primary, found = run_tests(store, result)
        suites.append((test, primary))
        slices += found
    return families(suites, slices)
