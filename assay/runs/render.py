"""Human-readable run summaries (markdown), built from evidence records only."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from assay.corrected_difference import corrected_lines
from assay.judge.reliability import judge_lines
from assay.rate import rate_text
from assay.regression import (
    Comparison,
    ConversationComparison,
    ConversationFlip,
    CrossSuite,
    RegressionStatus,
)
from assay.runs.records import EvalResult
from assay.stats import Interval
from assay.verdicts import FlowVerdict


def warnings(result: EvalResult) -> list[str]:
    """Declared warnings: everything excluded or missing, counted, never silent."""
    m = result.metrics
    notes = []
    if m.missing:
        notes.append(f'{m.missing} case(s) had no output and were failed ("no output")')
    if m.skipped_checks:
        notes.append(
            f"{m.skipped_checks} check(s) skipped and excluded from scores "
            "(each case's label says why)"
        )
    for why, count in sorted(m.unavailable.items()):
        kind, _, reason = why.partition(": ")
        notes.append(f"{count} {kind} check{'s' if count != 1 else ''} unavailable: {reason}")
    if m.incomplete:
        notes.append(
            f"{m.incomplete} case(s) incomplete: a check could not be scored (a judge that could"
            " not answer, or evidence the record did not capture); counted against coverage,"
            " never as passed"
        )
    if m.not_judged:
        notes.append(
            f"{m.not_judged} case(s) carry only judged checks and were left out of coverage "
            "(no judge or no credentials)"
        )
    if other := m.skipped - m.incomplete - m.not_judged:
        notes.append(f"{other} case(s) skipped entirely and excluded from the denominator")
    if m.errors:
        notes.append(f"{m.errors} case(s) had a scorer error and were failed")
    if m.judge_calls_over_bound:
        notes.append(
            f"{m.judge_calls_over_bound} judge call(s) reported more output tokens than "
            "max_tokens allows; recorded as reported"
        )
    if result.sample is not None:
        notes.append(f"sampled run: {m.cases} case(s) chosen with seed {result.seed}")
    return notes + result.judge_warnings


RATE_KINDS = frozenset({"trajectory_precision", "trajectory_recall"})
"""Check kinds whose score is a fraction worth a mean (matched calls / calls)."""


def check_kind_lines(result: EvalResult) -> list[str]:
    """Per check kind, its pass rate with its denominator and Wilson interval, e.g.
    `trajectory: 0.683 (41/60, 95% CI 0.558–0.787)`; precision and recall add their mean."""
    lines = []
    for kind, tally in sorted(result.metrics.checks_by_kind.items()):
        line = f"{kind}: {rate_text(tally.passed, tally.scored)}"
        if kind in RATE_KINDS and tally.mean_score is not None:
            measure = kind.removeprefix("trajectory_")
            line += f"; mean {measure} {tally.mean_score:.3f} (n={tally.scored})"
        lines.append(line)
    return lines


def trial_lines(result: EvalResult) -> list[str]:
    """The trial and cluster figures in words, e.g. `trials: 40 over 10 case(s) (3–5 each):
    pass rate 0.650, 95% CI 0.512–0.788 (cluster-robust …); pass@1 0.650 · pass@3 0.900;
    pass^1 0.650 · pass^3 0.400; flaky 6 case(s): a, b, …`."""
    lines = []
    trials = result.trials
    if trials is not None:
        rate = trials.pass_rate
        each = f"{trials.k_min}" + ("" if trials.k_min == trials.k_max else f"–{trials.k_max}")
        at_k = " · ".join(f"pass@{k} {v:.3f}" for k, v in trials.pass_at_k.items())
        pow_k = " · ".join(f"pass^{k} {v:.3f}" for k, v in trials.pass_pow_k.items())
        lines.append(
            f"trials: {trials.trials} over {trials.cases} case(s) ({each} each): pass rate "
            f"{rate.rate:.3f}, 95% CI {rate.lo:.3f}–{rate.hi:.3f} ({rate.method}); {at_k}; "
            f"{pow_k}; flaky {trials.flaky_cases} case(s)"
            f"{_listed(trials.flaky, trials.flaky_cases)}"
        )
    clustered = result.clustered
    if clustered is not None:
        lines.append(
            f"clustered: pass rate {clustered.rate:.3f}, 95% CI {clustered.lo:.3f}–"
            f"{clustered.hi:.3f} over {clustered.clusters} cluster(s) (cluster-robust SE "
            f"{clustered.se:.4f})"
        )
    return lines


def conversation_lines(result: EvalResult) -> list[str]:
    """The conversation figures (docs/conversations.md): the conversations' pass rate (the run's,
    Wilson), the turn-level pass rate with conversations as clusters, and the rate by turn
    index, e.g. `turn 2: 0.500 (3/6, 95% CI …)`."""
    turns = result.metrics.turns
    if turns is None:
        return []
    m = result.metrics
    lines = [f"conversations: pass rate {rate_text(m.passed, m.scored)}"]
    estimate = turns.turn_rate()
    trials = ", each with its trials, here and by turn" if turns.index_shapes else ""
    if estimate is not None:
        scored = sum(n for n, _ in turns.by_index.values())
        passed = sum(c for _, c in turns.by_index.values())
        lines.append(
            f"turns: pass rate {estimate.mean:.3f} ({passed}/{scored}), 95% CI "
            f"{estimate.lo:.3f}–{estimate.hi:.3f} over {turns.conversations} conversation(s) "
            f"(cluster-robust SE {estimate.se:.4f}, conversations as clusters{trials})"
        )
    lines += [
        f"turn {index}: " + (rate_text(c, n) if interval is None else _rate_in(c, n, interval))
        for index, n, c, interval in turns.by_turn()
    ]
    return lines


def _rate_in(passed: int, scored: int, interval: Interval) -> str:
    return f"{passed / scored:.3f} ({passed}/{scored}, 95% CI {interval.lo:.3f}–{interval.hi:.3f})"


def why_not(result: EvalResult) -> str:
    """` — coverage 1/5 below 0.95` for a run that did not pass, else `""`."""
    return f" — {result.verdict_reason}" if result.verdict_reason and not result.passed else ""


def _code(run_id: str) -> str:
    return f"`{run_id}`"


def markdown_summary(
    result: EvalResult, run_link: Callable[[str], str] = _code, cases_link: str | None = None
) -> str:
    """The run summary shown as a Prefect markdown artifact; `run_link` renders a run id (the
    artifact links it to the run's page in the Prefect UI), `cases_link` is the address of the
    per-case table."""
    m = result.metrics
    verdict = "✅ passed" if result.passed else f"❌ did not pass{why_not(result)}"
    subject = result.subject
    score = "n/a" if result.score is None else f"{result.score:.3f}"
    lines = [
        f"# {result.suite}@{result.suite_version} · {subject}",
        "",
        f"**{verdict}** — pass rate {rate_text(m.passed, m.scored)}, "
        f"threshold {result.pass_threshold:.2f}; coverage {m.coverage_text()} "
        f"(min {result.min_coverage:g}); mean score {score}",
        "",
        "| cases | scored | passed | failed | skipped | missing | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {m.cases} | {m.scored} | {m.passed} | {m.failed} | {m.skipped} | {m.missing} "
        f"| {m.errors} |",
        "",
        f"Run {run_link(result.run_id)} · outputs `{result.outputs}` · "
        f"{result.occurred_at:%Y-%m-%d %H:%M} UTC",
    ]
    if cases_link is not None:
        lines += ["", f"**[Every case: id, status, vs baseline]({cases_link})** (failures first)"]
    kinds = check_kind_lines(result)
    if kinds:
        lines += ["", "**Checks by kind**", *[f"- {line}" for line in kinds]]
    conversations = conversation_lines(result)
    if conversations:
        lines += ["", "**Conversations**", *[f"- {line}" for line in conversations]]
    repeated = trial_lines(result)
    if repeated:
        lines += ["", "**Trials and clusters**", *[f"- {line}" for line in repeated]]
    judged = judge_lines(result)
    if judged:
        lines += ["", "**Judge**", *[f"- {line}" for line in judged]]
    notes = warnings(result)
    if notes:
        lines += ["", "**Warnings**", *[f"- {note}" for note in notes]]
    lines += [
        "",
        "**Compared with baseline**",
        *[f"- {line}" for line in regression_lines(result.regression, run_link)],
    ]
    return "\n".join(lines)


def cross_suite_line(cross: CrossSuite) -> str:
    """What a comparison with a baseline of another suite says of it, wherever it is shown."""
    return (
        f"cross-suite: the baseline is a run of suite {cross.baseline_suite}, this run of "
        f"{cross.candidate_suite} (compared as asked, --cross-suite)"
    )


def regression_lines(
    regression: Comparison | None, run_link: Callable[[str], str] = str
) -> list[str]:
    """The comparison with the baseline, in words: both denominators, interval, paired test."""
    if regression is None or regression.status is RegressionStatus.NO_BASELINE:
        return ["no baseline: nothing to compare with yet"]
    assert regression.baseline is not None
    b, c = regression.baseline, regression.candidate
    interval = (
        "n/a"
        if regression.interval is None
        else f"{regression.interval[0]:+.3f} to {regression.interval[1]:+.3f}"
    )
    drop = "n/a" if regression.score_drop is None else f"{regression.score_drop:+.3f}"
    lines = [
        f"{regression.status.value} vs {regression.baseline_source or ''} baseline "
        f"{run_link(regression.baseline_run or '')}: "
        f"pass {b.passed}/{b.scored} → {c.passed}/{c.scored}, "
        f"drop 95% CI {interval} (Newcombe), score drop {drop} "
        f"(threshold {regression.threshold:.2f})"
    ]
    if regression.cross_suite is not None:
        lines.append(cross_suite_line(regression.cross_suite))
    paired = regression.paired
    if paired is not None:
        pi = (
            "n/a"
            if paired.interval is None
            else (f"{paired.interval[0]:+.3f} to {paired.interval[1]:+.3f}")
        )
        units = "cases"
        held = regression.conversations
        pairs = paired.both_pass + paired.baseline_only + paired.candidate_only + paired.both_fail
        if held is not None and held.compared == pairs:
            units = "conversations"
        lines.append(
            f"paired over the same {units}: {paired.baseline_only} now fail, "
            f"{paired.candidate_only} now pass, {paired.both_pass} both pass, "
            f"{paired.both_fail} both fail; 95% CI {pi}; exact McNemar p={paired.mcnemar_p:.4f}"
        )
    lines += conversation_comparison_lines(regression.conversations)
    trials = regression.trials
    if trials is not None:
        lines.append(
            f"paired over trials ({trials.cases} shared case(s)): mean drop in pass fraction "
            f"{trials.mean_diff:+.3f}, SE {trials.se:.4f}, 95% CI {trials.interval[0]:+.3f} to "
            f"{trials.interval[1]:+.3f} ({trials.method})"
        )
    used = regression.intervals_used
    lines += corrected_lines(regression.judge_corrected, regression.judge_corrected_warning, used)
    detectable = regression.minimum_detectable_drop
    if detectable is not None:
        lines.append(
            f"minimum detectable drop {detectable:.3f} (two-sided 5%, 80% power)"
            + (
                f": larger than the regression threshold {regression.threshold:.2f}, so a "
                "regression of that size would likely go undetected — not detected is not "
                "absent"
                if regression.blind_to_threshold
                else ""
            )
        )
    flips = regression.trajectories
    if flips is not None:
        lines.append(
            f"trajectories over {flips.compared} case(s): {flips.newly_failing} newly failing"
            f"{_listed(flips.newly_failing_cases, flips.newly_failing)}, {flips.newly_passing}"
            f" newly passing{_listed(flips.newly_passing_cases, flips.newly_passing)}"
        )
    lines.append(
        "changed: " + ("; ".join(regression.changed) or "nothing (same suite and scorers)")
    )
    return lines


def conversation_comparison_lines(compared: ConversationComparison | None) -> list[str]:
    """The conversations against the baseline: the flipped ones with their first changed turn
    (`c7 at turn 2`), and the paired, clustered difference of turn-level pass rates."""
    if compared is None:
        return []
    failing = [_flip(flip) for flip in compared.newly_failing_conversations]
    passing = [_flip(flip) for flip in compared.newly_passing_conversations]
    lines = [
        f"conversation verdicts over {compared.compared} conversation(s): "
        f"{compared.newly_failing} newly failing"
        f"{_listed(failing, compared.newly_failing)}, {compared.newly_passing} newly passing"
        f"{_listed(passing, compared.newly_passing)}"
    ]
    turns = compared.turns
    if turns is not None:
        lines.append(
            f"turns paired over {turns.conversations} conversation(s) ({turns.turns} turns): "
            f"pass rate {turns.baseline_rate:.3f} → {turns.candidate_rate:.3f}, drop "
            f"{turns.mean_diff:+.3f}, SE {turns.se:.4f}, 95% CI {turns.interval[0]:+.3f} to "
            f"{turns.interval[1]:+.3f} ({turns.method})"
        )
    return lines


def _flip(flip: ConversationFlip) -> str:
    return flip.case_id + (
        " (a conversation check)" if flip.turn is None else f" at turn {flip.turn}"
    )


def _listed(cases: Sequence[str], count: int, shown: int = 5) -> str:
    if not cases:
        return ""
    more = f", +{count - shown} more" if count > shown else ""
    return " (" + ", ".join(cases[:shown]) + more + ")"


def suite_run_verdict(result: EvalResult) -> FlowVerdict:
    """Suite run: `Regressed` (against its baseline) beats `Passed` / `Not passed`."""
    m = result.metrics
    rate = f"pass rate {rate_text(m.passed, m.scored)}"
    regression = result.regression
    if regression is not None and regression.status is RegressionStatus.REGRESSED:
        assert regression.baseline is not None
        b = regression.baseline
        return FlowVerdict(
            name="Regressed",
            passed=False,
            message=f"{rate}, down from {b.passed}/{b.scored} in baseline "
            f"{regression.baseline_run}"
            + (
                ""
                if (corrected := regression.judge_corrected) is None
                else f"; judge-corrected drop {corrected.estimate:+.3f}"
            ),
        )
    threshold = f"threshold {result.pass_threshold:.2f}"
    if result.passed:
        return FlowVerdict(name="Passed", passed=True, message=f"{rate}, {threshold}")
    coverage = m.coverage
    if result.verdict_reason and (coverage is None or coverage < result.min_coverage):
        return FlowVerdict(name="Not passed", passed=False, message=result.verdict_reason)
    return FlowVerdict(name="Not passed", passed=False, message=f"{rate}, below {threshold}")


def nightly_verdict(jobs: Sequence[tuple[str, bool | None]]) -> FlowVerdict:
    """Nightly: `All passed`, or `Some failed` naming the jobs that did not pass.

    Args:
        jobs: Each job's `SUITE · SUBJECT` and whether it passed (None: the job failed).
    """
    bad = [name for name, passed in jobs if passed is not True]
    if not bad:
        return FlowVerdict(
            name="All passed", passed=True, message=f"{len(jobs)} of {len(jobs)} jobs passed"
        )
    return FlowVerdict(
        name="Some failed",
        passed=False,
        message=f"{len(bad)} of {len(jobs)} jobs did not pass: {', '.join(bad)}",
    )
