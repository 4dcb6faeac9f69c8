"""Conversations against a baseline, and trials nested under their conversation
(docs/conversations.md, docs/EVAL-METHODOLOGY.md "Conversations"): every figure against an
independent computation in numpy and statsmodels, to 1e-6.

The comparison runs go through the real suite-run flow on the session's Prefect API, with
conversations recorded as OpenAI chat messages.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import statsmodels.api as sm
import yaml
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from assay.error_bars import paired_clustered_diff
from assay.regression import Comparison
from assay.runs.metrics import tally
from assay.runs.render import markdown_summary
from assay.runs.scoring import CaseEvidence, TurnVerdict
from assay.runs.trials import settle_cases
from assay.scorers import Status
from assay.suites.suite import parse_suite
from tests.launched import suite_run

Z = 1.959963984540054
TURNS = 4
Grid = list[list[int | None]]
"""Per conversation, per turn of the case: 1 passed, 0 failed, None past the record's end."""


def _grid(rng: np.random.Generator, conversations: int, keep: float) -> Grid:
    """A seeded grid whose conversations differ in difficulty (so turns of one conversation
    agree), some of them recorded short."""
    grid: Grid = []
    for _ in range(conversations):
        ease = rng.uniform(0.7, 1.0)
        recorded = TURNS if rng.uniform() < keep else int(rng.integers(1, TURNS))
        grid.append([int(rng.uniform() < ease) if j < recorded else None for j in range(TURNS)])
    return grid


def _scored(row: list[int | None]) -> list[float | None]:
    """Each turn as the run scores it: the first turn past the record's end fails (`no turn
    j`), the later ones are not scored."""
    cut = next((j for j, v in enumerate(row) if v is None), len(row))
    return [float(v) if v is not None else (0.0 if j == cut else None) for j, v in enumerate(row)]


def _eq4(values: np.ndarray, groups: np.ndarray) -> tuple[float, float]:
    """Mean and Miller (2024) eq. 4 SE, the within-cluster double sum written out."""
    n, mean = len(values), values.mean()
    e = values - mean
    cross = sum(
        e[i] * e[j] for i in range(n) for j in range(n) if i != j and groups[i] == groups[j]
    )
    return float(mean), float(np.sqrt((e**2).sum() / (n * (n - 1)) + cross / n**2))


def _statsmodels_se(values: np.ndarray, groups: np.ndarray) -> float:
    """statsmodels' cluster-robust SE of an OLS on a constant (no correction), plus the CLT
    term's n − 1 that eq. 4 adds (the documented difference)."""
    n = len(values)
    fit = sm.OLS(values, np.ones(n)).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    extra = ((values - values.mean()) ** 2).sum() / (n**2 * (n - 1))
    return float(np.sqrt(fit.bse[0] ** 2 + extra))


def test_the_paired_clustered_difference_is_eq4_of_the_differences() -> None:
    rng = np.random.default_rng(37)
    sizes = rng.integers(1, 7, size=25)
    groups = np.repeat(np.arange(len(sizes)), sizes)
    ease = rng.uniform(0.2, 1.0, size=len(sizes))[groups]
    before = (rng.uniform(size=len(groups)) < ease).astype(float)
    after = (rng.uniform(size=len(groups)) < ease - 0.15).astype(float)
    estimate = paired_clustered_diff(list(before), list(after), [str(g) for g in groups])
    assert estimate is not None
    d = before - after
    mean, se = _eq4(d, groups)
    assert estimate.mean == pytest.approx(mean, abs=1e-6)
    assert estimate.mean == pytest.approx(before.mean() - after.mean(), abs=1e-12)
    assert estimate.se == pytest.approx(se, abs=1e-6)
    assert estimate.se == pytest.approx(_statsmodels_se(d, groups), abs=1e-6)
    assert (estimate.lo, estimate.hi) == pytest.approx((mean - Z * se, mean + Z * se), abs=1e-6)


def _write_suite(tmp_path: Path, conversations: int) -> str:
    cases = [
        {
            "id": f"c{i:02d}",
            "input": "Help me.",
            "turns": [{"scorers": [{"contains": f"ok-{j + 1}"}]} for j in range(TURNS)],
        }
        for i in range(conversations)
    ]
    suite = {"suite": "conv-regression", "pass_threshold": 0.5, "cases": cases}
    path = tmp_path / "suite.yaml"
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return str(path)


def _write_outputs(tmp_path: Path, name: str, grid: Grid) -> str:
    rows = []
    for i, row in enumerate(grid):
        messages: list[dict[str, str]] = []
        for j, passed in enumerate(row):
            if passed is None:
                break
            messages.append({"role": "user", "content": f"question {j + 1}"})
            messages.append(
                {"role": "assistant", "content": "ok-" if not passed else f"ok-{j + 1}"}
            )
        rows.append({"case_id": f"c{i:02d}", "messages": messages})
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def _first_moved(before: list[float | None], after: list[float | None], down: bool) -> int | None:
    for j, (was, now) in enumerate(zip(before, after, strict=True), start=1):
        if was is not None and now is not None and (now < was if down else now > was):
            return j
    return None


@pytest.mark.usefixtures("prefect_api")
def test_two_runs_of_conversations_compared_against_independent_computations(
    store_dir: Path, tmp_path: Path
) -> None:
    rng = np.random.default_rng(2024)
    base_grid = _grid(rng, 30, keep=0.8)
    base_grid[3] = [1] * TURNS
    cand_grid = [
        [None if v is None else (v if rng.uniform() < 0.88 else 1 - v) for v in row]
        for row in base_grid
    ]
    cand_grid[3] = [1, None, None, None]  # recorded short: fails at turn 2
    base_grid[5], cand_grid[5] = [1, 0, 1, 1], [1, 1, 1, 1]  # turn 2 back to passing
    suite = _write_suite(tmp_path, len(base_grid))
    base = suite_run(suite=suite, outputs=_write_outputs(tmp_path, "v1", base_grid), subject="a:c")
    cand = suite_run(
        suite=suite,
        outputs=_write_outputs(tmp_path, "v2", cand_grid),
        subject="a:c",
        baseline=base.run_id,
    )
    comparison = cand.regression
    assert comparison is not None and comparison.conversations is not None

    before = [_scored(row) for row in base_grid]
    after = [_scored(row) for row in cand_grid]
    passes = [[all(v == 1.0 for v in row) for row in runs] for runs in (before, after)]
    # McNemar on the conversations' verdicts, as statsmodels computes it.
    table = np.zeros((2, 2), dtype=int)
    for was, now in zip(*passes, strict=True):
        table[1 - was, 1 - now] += 1
    paired = comparison.paired
    assert paired is not None
    assert (paired.both_pass, paired.baseline_only, paired.candidate_only, paired.both_fail) == (
        table[0, 0],
        table[0, 1],
        table[1, 0],
        table[1, 1],
    )
    assert paired.mcnemar_p == pytest.approx(mcnemar(table, exact=True).pvalue, abs=1e-6)

    # The paired, clustered difference over the turns both runs scored.
    pairs = [
        (was, now, c)
        for c, (b_row, c_row) in enumerate(zip(before, after, strict=True))
        for was, now in zip(b_row, c_row, strict=True)
        if was is not None and now is not None
    ]
    d = np.array([was - now for was, now, _ in pairs])
    groups = np.array([c for _, _, c in pairs])
    mean, se = _eq4(d, groups)
    turns = comparison.conversations.turns
    assert turns is not None
    assert (turns.turns, turns.conversations) == (len(pairs), len(set(groups)))
    assert turns.baseline_rate == pytest.approx(np.mean([p[0] for p in pairs]), abs=1e-6)
    assert turns.candidate_rate == pytest.approx(np.mean([p[1] for p in pairs]), abs=1e-6)
    assert turns.mean_diff == pytest.approx(mean, abs=1e-6)
    assert turns.se == pytest.approx(se, abs=1e-6)
    assert turns.se == pytest.approx(_statsmodels_se(d, groups), abs=1e-6)
    assert turns.interval == pytest.approx([mean - Z * se, mean + Z * se], abs=1e-6)

    # The flipped conversations with their first turn that moved their way.
    expected_failing = [
        (f"c{c:02d}", _first_moved(before[c], after[c], down=True))
        for c in range(len(before))
        if passes[0][c] and not passes[1][c]
    ]
    expected_passing = [
        (f"c{c:02d}", _first_moved(before[c], after[c], down=False))
        for c in range(len(before))
        if passes[1][c] and not passes[0][c]
    ]
    listed = comparison.conversations
    assert [(f.case_id, f.turn) for f in listed.newly_failing_conversations] == expected_failing
    assert [(f.case_id, f.turn) for f in listed.newly_passing_conversations] == expected_passing
    assert ("c03", 2) in expected_failing and ("c05", 2) in expected_passing

    summary = markdown_summary(cand)
    assert f"paired over the same conversations: {paired.baseline_only} now fail" in summary
    case_id, turn = expected_failing[0]
    assert f"{case_id} at turn {turn}" in summary
    assert f"turns paired over {turns.conversations} conversation(s)" in summary

    # The record: kept with the result, and a record without it still reads.
    stored = json.loads(comparison.model_dump_json())
    assert stored["conversations"]["newly_failing"] == len(expected_failing)
    del stored["conversations"]
    assert Comparison.model_validate(stored).conversations is None
    assert "conversations" not in Comparison.model_validate(stored).model_dump()


TRIALS: dict[str, list[list[int | None]]] = {
    "a": [[1, 1, 1], [1, 1, 1], [1, 1, 0]],
    "b": [[0, 0, 0], [0, 0, 1], [0, 0, 0]],
    "c": [[1, 0, 1], [1, 0, 1]],
    "d": [[1, 1, 0], [1, 1, None], [1, 1, 1], [1, 0, 1]],
}
"""Per conversation, its trials' turns: 1 passed, 0 failed, None not scored."""


def _trial_evidence() -> list[CaseEvidence]:
    status = {1: Status.PASS, 0: Status.FAIL, None: Status.SKIPPED}
    longest = max(len(t) for t in TRIALS.values())
    return [  # trial-major, as a run's chunks hold them
        CaseEvidence(
            case_id=case_id,
            status=Status.PASS if all(v == 1 for v in trials[k]) else Status.FAIL,
            score=None,
            output_hmac=None,
            label="x",
            checks=[],
            trial=k + 1,
            turns=[
                TurnVerdict(turn=j + 1, status=status[v], score=None, label="x")
                for j, v in enumerate(trials[k])
            ],
        )
        for k in range(longest)
        for case_id, trials in TRIALS.items()
        if k < len(trials)
    ]


def test_a_conversations_trials_are_one_cluster_for_the_turn_figures() -> None:
    suite = parse_suite(
        "suite: s\ntrials: {min: 1, case_passes: all}\ncases:\n"
        + "".join(
            f"  - id: {c}\n    input: q\n    turns: [{{scorers: [{{contains: x}}]}},"
            " {scorers: [{contains: x}]}, {scorers: [{contains: x}]}]\n"
            for c in TRIALS
        ),
        "s.yaml",
    )
    evidence = _trial_evidence()
    per_trial = tally(evidence[:5])
    per_trial.merge(tally(evidence[5:]))  # a conversation's trials in two chunks
    settled = settle_cases(lambda: evidence, suite.trials, per_trial, suite)
    turns = settled.metrics.turns
    assert turns is not None and turns.conversations == len(TRIALS)

    items = [(v, c) for c, trials in TRIALS.items() for t in trials for v in t if v is not None]
    values = np.array([v for v, _ in items], dtype=float)
    groups = np.array([c for _, c in items])
    mean, se = _eq4(values, groups)
    estimate = turns.turn_rate()
    assert estimate is not None
    assert (estimate.mean, estimate.se) == pytest.approx((mean, se), abs=1e-6)
    assert estimate.se == pytest.approx(_statsmodels_se(values, groups), abs=1e-6)

    for index, scored, passed, interval in turns.by_turn():
        at = [(t[index - 1], c) for c, ts in TRIALS.items() for t in ts if t[index - 1] is not None]
        column = np.array([v for v, _ in at], dtype=float)
        assert (scored, passed) == (len(column), int(column.sum()))
        mean, se = _eq4(column, np.array([c for _, c in at]))
        assert interval is not None
        assert (interval.lo, interval.hi) == pytest.approx(
            (max(0.0, mean - Z * se), min(1.0, mean + Z * se)), abs=1e-6
        )

    # Without trials, a turn index keeps Wilson's interval (one turn a conversation there).
    single = tally(e for e in evidence if e.trial == 1).turns
    assert single is not None
    for _index, scored, passed, interval in single.by_turn():
        lo, hi = proportion_confint(passed, scored, method="wilson")
        assert interval is not None and (interval.lo, interval.hi) == pytest.approx((lo, hi))
