"""Release signals (SPEC §12, seed 002): the seed's worked example figure by figure, each gate
failing in isolation, coverage gaps, waits, intervals, input errors, the CLI contract and the
`release` flow's evidence and artifact against a real Prefect API."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.rate import rate_text
from assay.release import (
    GATE_ORDER,
    ReleaseContract,
    ReleaseReport,
    VariantReport,
    build_report,
    load_contract,
    load_report,
    load_trials,
    record_report,
    report_key,
    row,
)
from assay.release.options import ReleaseOptions
from assay.release.render import COLUMNS, counts
from assay.schemes import open_store
from assay.stats import wilson
from assay.store import FileStore
from tests import launched
from tests.conftest import EXAMPLES

TRIALS = EXAMPLES / "release" / "trials.jsonl"
CONTRACT = EXAMPLES / "release" / "contract.yaml"
TRIAL_TEXT = ("invoice", "finance-approver", "awaiting approval", "create_invoice", "rubric-v3")
"""Free text of the example trials that must never reach the report, evidence or artifact."""
SEED_DAY = datetime(2025, 6, 2, 12, tzinfo=UTC)
"""Evaluation time of the seed's example: before its approval wait expires (17:00 that day)."""

VARIANT_KEYS = {
    "variant",
    "trials",
    "quality",
    "progress",
    "tool_effects",
    "cost",
    "false_success",
    "unverified_completions",
    "gate",
}
NESTED_KEYS = {
    "quality": {"mean", "graded", "completed"},
    "progress": {"with_delta", "active"},
    "tool_effects": {"verified", "failed", "unknown", "declined"},
    "cost": {"total", "per_run", "per_verified", "estimated", "missing"},
    "false_success": {"count", "claimed"},
    "gate": {"passed", "stopped_at", "results"},
}


def _trial(n: int, **changes: Any) -> dict[str, Any]:
    """A trial that passes every gate: graded 0.9, 3/3 windows, two verified effects, $0.10."""
    trial: dict[str, Any] = {
        "trial_id": f"t{n}",
        "variant": "candidate",
        "task_class": "invoice",
        "quality": {"status": "graded", "score": 0.9, "grader": "rubric-v3"},
        "progress": {"active_windows": 3, "windows_with_delta": 3, "wait": None},
        "tool_effects": [
            {"call": "create_invoice", "verdict": "verified"},
            {"call": "send_receipt", "verdict": "verified"},
        ],
        "cost_usd": 0.10,
        "cost_status": "measured",
        "claimed_completion": True,
        "outcome": "verified",
    }
    trial.update(changes)
    return trial


def _write(path: Path, rows: list[dict[str, Any]] | list[str]) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return str(path)


def _variant(
    tmp_path: Path,
    rows: list[dict[str, Any]],
    contract: ReleaseContract | None = None,
    now: datetime = SEED_DAY,
) -> VariantReport:
    source = _write(tmp_path / "trials.jsonl", rows)
    report = build_report(load_trials(source), contract or ReleaseContract(), source, now=now)
    assert len(report.variants) == 1
    return report.variants[0]


def _failing(variant: VariantReport) -> list[str]:
    return [r.gate for r in variant.gate.results if not r.passed]


# --- the seed's worked example ------------------------------------------------------------


def _example(contract: ReleaseContract | None = None, now: datetime = SEED_DAY) -> ReleaseReport:
    return build_report(
        load_trials(str(TRIALS)), contract or load_contract(CONTRACT), str(TRIALS), now=now
    )


def test_seed_table_figure_by_figure() -> None:
    report = _example()
    stable, fast = report.variants
    assert [stable.variant, fast.variant] == ["stable v1", "fast v2"]
    assert stable.trials == fast.trials == 5
    assert row(stable, 30) == [
        "stable v1",
        "0.818 (4/4)",
        "14/14",
        "5/5 (1 declined)",
        "$0.41",
        "$0.52",
        "0/4",
        "0/4",
        "PASS",
    ]
    assert row(fast, 30) == [
        "fast v2",
        "0.902 (5/5)",
        "15/16",
        "4/5",
        "$0.38",
        "$0.63",
        "1/5",
        "1/5",
        "FAIL at false_success",
    ]
    # The cells come from the counts, not from rounding luck.
    assert stable.quality.model_dump() == {"mean": 0.818, "graded": 4, "completed": 4}
    assert fast.quality.model_dump() == {"mean": 0.902, "graded": 5, "completed": 5}
    assert stable.tool_effects.model_dump() == {
        "verified": 5,
        "failed": 0,
        "unknown": 0,
        "declined": 1,
    }
    assert fast.tool_effects.model_dump() == {
        "verified": 4,
        "failed": 0,
        "unknown": 1,
        "declined": 0,
    }
    assert stable.cost.model_dump() == {
        "total": 2.07,
        "per_run": 0.414,
        "per_verified": 0.5175,
        "estimated": 0,
        "missing": 0,
    }
    assert fast.cost.model_dump() == {
        "total": 1.89,
        "per_run": 0.378,
        "per_verified": 0.63,
        "estimated": 0,
        "missing": 0,
    }
    assert (fast.false_success.count, fast.false_success.claimed) == (1, 5)
    assert fast.unverified_completions == 1
    assert not report.passed


def test_cheaper_per_run_is_dearer_per_verified_result_and_stops_at_false_success() -> None:
    stable, fast = _example().variants
    assert fast.cost.per_run is not None and stable.cost.per_run is not None
    assert fast.cost.per_verified is not None and stable.cost.per_verified is not None
    assert fast.cost.per_run < stable.cost.per_run
    assert fast.cost.per_verified > stable.cost.per_verified
    assert fast.quality.mean is not None and stable.quality.mean is not None
    assert fast.quality.mean > stable.quality.mean  # better prose does not buy a release
    assert stable.gate.passed and stable.gate.stopped_at is None
    assert fast.gate.stopped_at == "false_success"
    # Every gate is listed in order; the later ones fail too, but the first one stops it.
    assert [r.gate for r in fast.gate.results] == list(GATE_ORDER)
    assert _failing(fast) == ["false_success", "unknown_effects", "floors"]


def test_seed_wait_and_declined_call_stay_visible_without_counting_against() -> None:
    stable = _example().variants[0]
    assert stable.quality.completed == 4  # the waiting trial claimed nothing
    assert stable.tool_effects.declined == 1  # the boundary held: shown, not failed
    floors = next(r for r in stable.gate.results if r.gate == "floors")
    details = " ".join(check.detail for check in floors.checks)
    assert "1 explicit wait(s) stopped the clock: 0 waiting window(s) not active" in details
    assert "1 declined call(s) shown apart" in details
    # Evaluated after the wait expired, the wait is stale; its trial had no window without
    # delta, so the seed's figures stand either way.
    later = _example(now=datetime(2026, 1, 1, tzinfo=UTC)).variants[0]
    assert later.progress.model_dump() == {"with_delta": 14, "active": 14}
    floors = next(r for r in later.gate.results if r.gate == "floors")
    assert "1 expired wait(s): their windows count as active" in floors.checks[0].detail


def test_seed_cost_budget_of_sixty_cents() -> None:
    """The seed's demo budget ($0.60 per verified result): fast v2 fails it too, stable does not."""
    stable, fast = _example(ReleaseContract(cost_per_verified_max=0.60)).variants
    assert stable.gate.passed
    assert "quality_cost" in _failing(fast)
    assert fast.gate.stopped_at == "false_success"


# --- each gate failing in isolation ------------------------------------------------------

BASE = 10
"""Ten good trials: 30/30 windows, 20/20 verified effects, 10/10 verified outcomes."""


def _base(**changes_of_first: Any) -> list[dict[str, Any]]:
    return [_trial(0, **changes_of_first)] + [_trial(n) for n in range(1, BASE)]


def test_baseline_passes_every_gate(tmp_path: Path) -> None:
    variant = _variant(tmp_path, _base())
    assert variant.gate.passed and variant.gate.stopped_at is None
    assert all(check.passed for r in variant.gate.results for check in r.checks)


@pytest.mark.parametrize(
    ("changes", "gate"),
    [
        ({"outcome": None}, "coverage"),
        ({"tool_effects": [{"call": "create_invoice"}]}, "coverage"),
        ({"tool_effects": [{"call": "create_invoice", "verdict": None}]}, "coverage"),
        ({"outcome": "failed"}, "false_success"),
        ({"outcome": "unavailable"}, "false_success"),
        (
            {
                "tool_effects": [
                    {"call": "a", "verdict": "verified"},
                    {"call": "b", "verdict": "verified"},
                    {"call": "c", "verdict": "unknown"},
                ]
            },
            "unknown_effects",
        ),
        (
            {
                "tool_effects": [
                    {"call": "a", "verdict": "failed"},
                    {"call": "b", "verdict": "failed"},
                ]
            },
            "floors",
        ),
        ({"progress": {"active_windows": 6, "windows_with_delta": 2}}, "floors"),
    ],
    ids=[
        "claimed-outcome-null",
        "tool-verdict-absent",
        "tool-verdict-null",
        "false-success",
        "unverified-completion",
        "unknown-effect",
        "tool-effect-floor",
        "progress-floor",
    ],
)
def test_each_gate_fails_alone(tmp_path: Path, changes: dict[str, Any], gate: str) -> None:
    variant = _variant(tmp_path, _base(**changes))
    assert _failing(variant) == [gate]
    assert variant.gate.stopped_at == gate
    assert not variant.gate.passed


def test_quality_and_cost_gate_alone(tmp_path: Path) -> None:
    low_quality = _variant(tmp_path, _base(), ReleaseContract(quality_min=0.95))
    assert _failing(low_quality) == ["quality_cost"]
    dear = _variant(tmp_path, _base(), ReleaseContract(cost_per_verified_max=0.05))
    assert _failing(dear) == ["quality_cost"]
    assert dear.cost.per_verified == 0.1
    fine = _variant(tmp_path, _base(), ReleaseContract(quality_min=0.9, cost_per_verified_max=0.1))
    assert fine.gate.passed  # thresholds are inclusive


def test_one_unknown_effect_within_a_raised_maximum(tmp_path: Path) -> None:
    effects = [{"call": c, "verdict": v} for c, v in (("a", "verified"), ("b", "unknown"))]
    variant = _variant(
        tmp_path, _base(tool_effects=effects), ReleaseContract(unknown_effects_max=1)
    )
    assert variant.gate.passed
    assert variant.tool_effects.attempts == 20  # 19 verified + 1 unknown


def test_coverage_gaps_are_not_counted_as_outcomes_or_effects(tmp_path: Path) -> None:
    variant = _variant(
        tmp_path,
        _base(outcome=None, tool_effects=[{"call": "a"}, {"call": "b", "verdict": "verified"}]),
    )
    assert variant.false_success.model_dump() == {"count": 0, "claimed": 10}
    assert variant.unverified_completions == 0
    assert variant.tool_effects.verified == 19
    assert variant.cost.per_verified == pytest.approx(1.0 / 9)  # 9 verified outcomes
    coverage = variant.gate.results[0]
    assert [c.detail for c in coverage.checks if not c.passed] == [
        "9/10 claimed completions have an outcome verdict or an explicit `unavailable`; "
        "1 have none",
        "19/20 tool calls have a destination verdict; 1 have none",
    ]


# --- waits, declined calls, zero denominators, costs --------------------------------------

WAIT = {
    "owner": "finance-approver",
    "decision": "approve refund",
    "expires_at": "2025-06-02T17:00:00Z",
    "resume_state": "awaiting approval",
}


@pytest.mark.parametrize(
    ("wait", "now", "active", "passed", "detail"),
    [
        (WAIT, SEED_DAY, 32, True, "1 explicit wait(s) stopped the clock: 4 waiting window(s)"),
        (None, SEED_DAY, 36, False, "progress 32/36 = 0.889 is below the floor 0.90"),
        (WAIT, datetime(2025, 6, 3, tzinfo=UTC), 36, False, "1 expired wait(s)"),
    ],
    ids=["live-wait", "no-wait", "expired-wait"],
)
def test_explicit_wait_stops_the_clock_until_it_expires(
    tmp_path: Path,
    wait: dict[str, str] | None,
    now: datetime,
    active: int,
    passed: bool,
    detail: str,
) -> None:
    """A trial with 2 of 6 windows showing delta: waiting while the wait is live, stuck without
    a wait or once it has expired."""
    waiting = _trial(
        99,
        quality={"status": "not_graded"},
        progress={"active_windows": 6, "windows_with_delta": 2, "wait": wait},
        tool_effects=[{"call": "issue_refund", "verdict": "declined"}],
        claimed_completion=False,
        outcome=None,
    )
    variant = _variant(tmp_path, [*_base(), waiting], now=now)
    assert variant.progress.model_dump() == {"with_delta": 32, "active": active}
    assert variant.gate.passed is passed
    assert _failing(variant) == ([] if passed else ["floors"])
    floors = next(r for r in variant.gate.results if r.gate == "floors")
    assert detail in floors.checks[0].detail
    assert variant.quality.model_dump() == {"mean": 0.9, "graded": 10, "completed": 10}
    assert variant.tool_effects.model_dump() == {
        "verified": 20,
        "failed": 0,
        "unknown": 0,
        "declined": 1,
    }


def test_a_stuck_run_without_a_wait_counts_against_progress(tmp_path: Path) -> None:
    stuck = _trial(
        99,
        progress={"active_windows": 4, "windows_with_delta": 0, "wait": None},
        claimed_completion=False,
        outcome=None,
    )
    variant = _variant(tmp_path, [*_base(), stuck])
    assert variant.progress.model_dump() == {"with_delta": 30, "active": 34}
    assert variant.gate.stopped_at == "floors"


def test_wait_without_owner_is_an_input_error(tmp_path: Path) -> None:
    wait = {k: v for k, v in WAIT.items() if k != "owner"}
    rows = [
        _trial(0),
        _trial(1, progress={"active_windows": 1, "windows_with_delta": 1, "wait": wait}),
    ]
    source = _write(tmp_path / "t.jsonl", rows)
    with pytest.raises(InputError) as caught:
        load_trials(source)
    assert (caught.value.line, caught.value.field) == (2, "progress.wait.owner")


def test_no_data_never_meets_a_floor(tmp_path: Path) -> None:
    idle = [_trial(n, progress={"active_windows": 0, "windows_with_delta": 0}) for n in range(3)]
    variant = _variant(tmp_path, idle)
    assert _failing(variant) == ["floors"]
    floors = variant.gate.results[3]
    assert "progress unavailable (0/0)" in floors.checks[0].detail

    no_tools = [_trial(n, tool_effects=[]) for n in range(3)]
    assert _failing(_variant(tmp_path, no_tools)) == ["floors"]
    assert _variant(tmp_path, no_tools, ReleaseContract(tool_effect_floor=None)).gate.passed


def test_quality_unavailable_is_not_a_pass(tmp_path: Path) -> None:
    ungraded = [_trial(n, quality={"status": "not_graded"}) for n in range(3)]
    variant = _variant(tmp_path, ungraded, ReleaseContract(quality_min=0.5))
    assert variant.quality.model_dump() == {"mean": None, "graded": 0, "completed": 3}
    assert _failing(variant) == ["quality_cost"]
    assert row(variant, 30)[1] == "n/a (0/3)"


def test_estimated_and_missing_costs_are_flagged(tmp_path: Path) -> None:
    estimated = _variant(tmp_path, _base(cost_status="estimated"))
    assert estimated.cost.estimated == 1
    assert row(estimated, 30)[4:6] == ["$0.10 (1 estimated)", "$0.10 (1 estimated)"]

    missing = _variant(tmp_path, _base(cost_usd=None, cost_status="missing"))
    assert missing.cost.model_dump() == {
        "total": 0.9,
        "per_run": None,
        "per_verified": None,
        "estimated": 0,
        "missing": 1,
    }
    assert row(missing, 30)[4:6] == ["n/a (1 missing)", "n/a (1 missing)"]
    assert missing.gate.passed  # no cost budget declared
    budgeted = _variant(
        tmp_path,
        _base(cost_usd=None, cost_status="missing"),
        ReleaseContract(cost_per_verified_max=1),
    )
    assert _failing(budgeted) == ["quality_cost"]  # an unknown cost never fits a budget


def test_no_claimed_completion_fails_false_success(tmp_path: Path) -> None:
    """A variant that never claims a completion verified nothing: 0/0 is no pass."""
    rows = [_trial(n, claimed_completion=False, outcome=None) for n in range(3)]
    variant = _variant(tmp_path, rows)
    assert variant.false_success.model_dump() == {"count": 0, "claimed": 0}
    assert _failing(variant) == ["false_success"]
    assert variant.gate.stopped_at == "false_success"
    (check,) = variant.gate.results[1].checks
    assert check.detail.startswith("no claimed completions: nothing was verified")
    # One claimed and verified completion is enough for the gate to have a denominator.
    rows[0] = _trial(0)
    assert _variant(tmp_path, rows).gate.passed


def test_no_verified_outcome_has_no_cost_per_verified(tmp_path: Path) -> None:
    rows = [_trial(n, claimed_completion=False, outcome=None) for n in range(3)]
    variant = _variant(tmp_path, rows)
    assert variant.cost.per_verified is None
    assert row(variant, 30)[5] == "n/a (0 verified)"


# --- intervals ------------------------------------------------------------------------------


def test_raw_counts_below_interval_min_n_and_wilson_at_or_above() -> None:
    assert counts(27, 29, 30) == "27/29"
    interval = wilson(27, 30)
    assert interval is not None
    text = counts(27, 30, 30)
    assert text == rate_text(27, 30)
    assert text == f"0.900 (27/30, 95% CI {interval.lo:.3f}–{interval.hi:.3f})"


def test_large_n_rows_show_intervals(tmp_path: Path) -> None:
    rows = [_trial(n) for n in range(40)]
    rows[0]["tool_effects"][0]["verdict"] = "failed"
    variant = _variant(tmp_path, rows, ReleaseContract(tool_effect_floor=0.9))
    cells = row(variant, 30)
    assert cells[2] == rate_text(120, 120)
    assert cells[3] == rate_text(79, 80)
    assert cells[6] == rate_text(0, 40)
    assert "95% CI" in cells[6]
    small = row(_example().variants[0], 5)  # the seed's 5/5 effects at a lower threshold
    assert small[3] == rate_text(5, 5) + " (1 declined)"
    assert small[6] == "0/4"


# --- input errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "field", "problem"),
    [
        ("{not json", None, "malformed JSON"),
        ("[1, 2]", None, "each line must be a JSON object"),
        (
            {k: v for k, v in _trial(1).items() if k != "cost_status"},
            "cost_status",
            "Field required",
        ),
        ({k: v for k, v in _trial(1).items() if k != "outcome"}, "outcome", "Field required"),
        (
            _trial(1, tool_effects=[{"call": "x", "verdict": "success"}]),
            "tool_effects.0.verdict",
            "'verified', 'failed', 'unknown' or 'declined'",
        ),
        (_trial(1, outcome="done"), "outcome", "'verified', 'failed' or 'unavailable'"),
        (_trial(1, cost_usd=-0.01), "cost_usd", "greater than or equal to 0"),
        (_trial(1, claimed_completion=False), "outcome", "only recorded for a claimed"),
        (
            _trial(1, progress={"active_windows": 2, "windows_with_delta": 3}),
            "progress.windows_with_delta",
            "3 windows with delta but only 2 active",
        ),
        (_trial(1, cost_usd=None), "cost_status", "cost_status is measured but cost_usd is null"),
        (_trial(1, cost_status="missing"), "cost_status", "cost_usd is given"),
        (_trial(1, quality={"status": "graded"}), "quality.score", "needs a score"),
        (_trial(1, quality={"status": "graded", "score": 1.5}), "quality.score", "less than"),
        (_trial(1, claimed_completion="yes"), "claimed_completion", "valid boolean"),
        (_trial(0), "trial_id", "duplicate trial id 't0' (first at line 1)"),
        (
            _trial(
                1,
                progress={
                    "active_windows": 1,
                    "windows_with_delta": 1,
                    "wait": {
                        "owner": "o",
                        "decision": "d",
                        "expires_at": "2025-06-02T17:00:00",
                        "resume_state": "r",
                    },
                },
            ),
            "progress.wait.expires_at",
            "timezone",
        ),
    ],
    ids=[
        "malformed-json",
        "not-an-object",
        "missing-cost-status",
        "missing-outcome",
        "unknown-verdict",
        "unknown-outcome",
        "negative-cost",
        "outcome-without-claim",
        "delta-over-active",
        "measured-without-cost",
        "missing-with-cost",
        "graded-without-score",
        "score-out-of-range",
        "claim-not-boolean",
        "duplicate-id",
        "wait-expiry-without-timezone",
    ],
)
def test_input_errors_name_the_line(
    tmp_path: Path, bad: dict[str, Any] | str, field: str | None, problem: str
) -> None:
    source = _write(
        tmp_path / "trials.jsonl", [_trial(0), "", bad if isinstance(bad, str) else json.dumps(bad)]
    )
    with pytest.raises(InputError) as caught:
        load_trials(source)
    error = caught.value
    assert (error.source, error.line, error.field) == (source, 3, field)
    assert problem in error.problem
    assert "invoice" not in str(error)  # the row's text is never echoed


def test_empty_and_absent_trials_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no trials"):
        load_trials(_write(tmp_path / "empty.jsonl", ["", "  "]))
    with pytest.raises(InputError, match="no such trials file"):
        load_trials(str(tmp_path / "absent.jsonl"))


def test_contract_defaults_and_errors(tmp_path: Path) -> None:
    assert load_contract(None) == ReleaseContract()
    assert load_contract(CONTRACT) == ReleaseContract()  # the example spells out the defaults
    assert ReleaseContract().model_dump() == {
        "false_success_max": 0,
        "unverified_completions_max": 0,
        "unknown_effects_max": 0,
        "progress_floor": 0.90,
        "tool_effect_floor": 0.95,
        "quality_min": None,
        "cost_per_verified_max": None,
        "interval_min_n": 30,
    }
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing declared\n")
    assert load_contract(empty) == ReleaseContract()
    ints = tmp_path / "ints.yaml"
    ints.write_text("progress_floor: 1\ncost_per_verified_max: 2\n")
    assert load_contract(ints) == ReleaseContract(progress_floor=1.0, cost_per_verified_max=2.0)

    for text, line, field in [
        ("false_success_max: 0\nprogress_floor: 1.5\n", 2, "progress_floor"),
        ("quality_min: 0.8\n\nfalse_sucess_max: 1\n", 3, "false_sucess_max"),
        ("interval_min_n: 0\n", 1, "interval_min_n"),
        ("false_success_max: true\n", 1, "false_success_max"),
        ("unknown_effects_max: 0\ninterval_min_n: false\n", 2, "interval_min_n"),
        ("progress_floor: true\n", 1, "progress_floor"),
        ("progress_floor: [0.9\n", None, None),
    ]:
        path = tmp_path / "contract.yaml"
        path.write_text(text)
        with pytest.raises(InputError) as caught:
            load_contract(path)
        if field is None:
            assert "malformed YAML" in caught.value.problem
        else:
            assert (caught.value.line, caught.value.field) == (line, field)


# --- the report as evidence -----------------------------------------------------------------


def test_report_outside_a_flow_is_content_addressed_and_write_once(tmp_path: Path) -> None:
    first, again = _example(), _example()
    assert first.report_id == again.report_id
    assert len(first.report_id) == 64
    assert _example(ReleaseContract(quality_min=0.5)).report_id != first.report_id
    store = FileStore(tmp_path / "evidence")
    assert record_report(store, first) == first
    assert record_report(store, again) == first  # first writer wins
    assert load_report(store, first.report_id) == first
    stored = (tmp_path / "evidence" / report_key(first.report_id)).read_text()
    assert not any(text in stored for text in TRIAL_TEXT)


# --- the command line and the flow ------------------------------------------------------------


def invoke(*args: str) -> tuple[int, str, str]:
    """Exit code, standard output and standard error (where Prefect's run logs also go)."""
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def _json_shape(variant: dict[str, Any]) -> None:
    assert set(variant) == VARIANT_KEYS
    for key, keys in NESTED_KEYS.items():
        assert set(variant[key]) == keys, key
    assert isinstance(variant["unverified_completions"], int)
    for result in variant["gate"]["results"]:
        assert set(result) == {"gate", "passed", "checks"}
        assert all(set(check) == {"passed", "detail"} for check in result["checks"])


@pytest.mark.usefixtures("prefect_api")
def test_cli_json_contract_and_exit_1(store_dir: Path) -> None:
    code, text, _ = invoke("release", str(TRIALS), "--contract", str(CONTRACT), "--json")
    assert code == 1
    body = json.loads(text)
    assert set(body) == {"report_id", "source", "contract", "created_at", "passed", "variants"}
    assert body["passed"] is False
    for variant in body["variants"]:
        _json_shape(variant)
    stable, fast = body["variants"]
    assert stable["gate"] == {
        "passed": True,
        "stopped_at": None,
        "results": stable["gate"]["results"],
    }
    assert fast["gate"]["stopped_at"] == "false_success"
    assert [r["gate"] for r in fast["gate"]["results"]] == list(GATE_ORDER)
    assert fast["cost"]["per_verified"] == 0.63
    UUID(body["report_id"])  # the flow run id
    stored = json.loads((store_dir / report_key(body["report_id"])).read_text())
    assert stored == body


@pytest.mark.usefixtures("prefect_api")
def test_cli_human_table_and_exit_0(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a wide terminal: one line per variant
    code, text, _ = invoke("release", str(TRIALS))
    assert code == 1
    lines = {line.split("│")[1].strip(): line for line in text.splitlines() if "│" in line}
    stable = [cell.strip() for cell in lines["stable v1"].split("│")[1:-1]]
    fast = [cell.strip() for cell in lines["fast v2"].split("│")[1:-1]]
    assert stable == row(_example().variants[0], 30)
    assert fast == row(_example().variants[1], 30)
    assert fast[-1] == "FAIL at false_success"
    flat = " ".join(text.split())
    assert "fast v2 stopped at false_success: false successes 1/5 exceeds the maximum 0" in flat
    assert "stable v1 stopped" not in flat

    passing = _write(tmp_path / "good.jsonl", _base())
    code, text, _ = invoke("release", passing)
    assert code == 0, text
    assert "PASS" in text and "FAIL" not in text


def test_cli_narrow_terminal_transposes_instead_of_cutting_figures(
    store_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # a CI log: the one-row-per-variant table would not fit
    _, text, _ = invoke("release", str(TRIALS))
    assert max(len(line) for line in text.splitlines()) <= 80
    cells = {
        line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
        for line in text.splitlines()
        if line.count("│") == 4
    }
    stable, fast = row(_example().variants[0], 30), row(_example().variants[1], 30)
    for index, signal in enumerate(COLUMNS[1:], start=1):
        assert cells[signal] == [stable[index], fast[index]]


def _wrapped_rows(text: str) -> dict[str, list[str]]:
    """Table rows whose cells span several lines, joined back: {variant: cells}."""
    rows: dict[str, list[str]] = {}
    current: list[str] = []
    for line in text.splitlines():
        if line.count("│") != len(COLUMNS) + 1:
            continue
        cells = [cell.strip() for cell in line.split("│")[1:-1]]
        if cells[0]:
            current = rows.setdefault(cells[0], cells)
        else:
            current[:] = [f"{a} {b}".strip() for a, b in zip(current, cells, strict=True)]
    return rows


@pytest.mark.usefixtures("prefect_api")
def test_cli_seed_layout_fits_100_columns(store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At 100 columns the one-row-per-variant table stays: notes wrap between figures and the
    gate cell is short, the `stopped:` line naming the gate."""
    monkeypatch.setenv("COLUMNS", "100")
    _, text, _ = invoke("release", str(TRIALS))
    assert max(len(line) for line in text.splitlines()) <= 100
    rows = _wrapped_rows(text)
    stable, fast = row(_example().variants[0], 30), row(_example().variants[1], 30)
    assert rows["stable v1"] == stable
    assert rows["fast v2"] == [*fast[:-1], "FAIL"]
    assert "stopped: fast v2 stopped at false_success" in text


def test_cli_error_message_is_plain_text(store_dir: Path, tmp_path: Path) -> None:
    """`fail()` prints the message as text: brackets in it are not Rich markup."""
    absent = str(tmp_path / "trials[@VARIANT][/b].jsonl")
    code, text, error = invoke("release", absent)
    assert (code, text) == (2, "")
    assert " ".join(error.split()) == f"error: {absent}: no such trials file"


@pytest.mark.usefixtures("prefect_api")
def test_cli_prints_variant_names_as_text(
    store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A variant named like markup is printed as it is, in both table layouts and the stop line."""
    rows = [{**trial, "variant": "v[/b]2"} for trial in _base(outcome="failed")]
    trials = _write(tmp_path / "trials.jsonl", rows)
    for columns in ("200", "60"):
        monkeypatch.setenv("COLUMNS", columns)
        code, text, error = invoke("release", trials)
        assert code == 1, error
        cells = [cell.strip() for line in text.splitlines() for cell in re.split("[│┃]", line)]
        assert "v[/b]2" in cells  # a row (wide) or a column header (transposed)
        assert "stopped: v[/b]2 stopped at false_success" in " ".join(text.split())


@pytest.mark.parametrize(
    ("rows", "contract", "where"),
    [
        (["{oops"], None, "line 1: malformed JSON"),
        ([_trial(0, cost_usd=-1)], None, "line 1, field cost_usd"),
        ([_trial(0)], "progress_floor: 2\n", "contract.yaml line 1, field progress_floor"),
    ],
    ids=["malformed-json", "negative-cost", "bad-contract"],
)
def test_cli_input_errors_exit_2_and_write_nothing(
    store_dir: Path, tmp_path: Path, rows: list[Any], contract: str | None, where: str
) -> None:
    trials = _write(tmp_path / "trials.jsonl", rows)
    args = ["release", trials]
    if contract is not None:
        (tmp_path / "contract.yaml").write_text(contract)
        args += ["--contract", str(tmp_path / "contract.yaml")]
    code, text, error = invoke(*args)
    assert (code, text) == (2, "")
    assert where in error
    assert len(error.strip().splitlines()) == 1
    assert not store_dir.exists() or not list(store_dir.rglob("*.json"))


@pytest.mark.usefixtures("prefect_api")
def test_flow_records_evidence_and_publishes_artifact(store_dir: Path) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    options = ReleaseOptions(
        trials=str(TRIALS), contract=str(CONTRACT), store=f"file://{store_dir}"
    )
    report = launched.flow("release", options)
    run_id = UUID(report.report_id)
    assert load_report(FileStore(store_dir), report.report_id) == report
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(run_id)
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
        )
    assert run.name == "release · trials.jsonl"
    assert run.parameters["options"]["trials"] == str(TRIALS)  # a reference, not content
    (artifact,) = artifacts
    assert artifact.type == "markdown" and artifact.key == "assay-release-trials"
    markdown = str(artifact.data)
    assert "| stable v1 | 0.818 (4/4) | 14/14 | 5/5 (1 declined) | $0.41 | $0.52 |" in markdown
    assert "| fast v2 | 0.902 (5/5) | 15/16 | 4/5 | $0.38 | $0.63 | 1/5 | 1/5 |" in markdown
    assert "fast v2 stopped at false_success" in markdown
    for text in TRIAL_TEXT:
        assert text not in markdown
        assert text not in (store_dir / report_key(report.report_id)).read_text()


@pytest.mark.usefixtures("prefect_api")
def test_flow_reads_trials_from_s3(s3_env: str, moto_s3: Any) -> None:
    bucket = s3_env.removeprefix("s3://").split("/")[0]
    moto_s3.client().put_object(Bucket=bucket, Key="in/trials.jsonl", Body=TRIALS.read_bytes())
    options = ReleaseOptions(trials=f"s3://{bucket}/in/trials.jsonl", store=s3_env)
    report = launched.flow("release", options)
    assert [v.gate.stopped_at for v in report.variants] == [None, "false_success"]
    stored = open_store(s3_env).get(report_key(report.report_id))
    assert ReleaseReport.model_validate_json(stored) == report
