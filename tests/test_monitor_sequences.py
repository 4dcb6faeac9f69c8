"""Anytime-valid monitoring (issue #40 item 3): the betting confidence sequence against a port of
confseq's own loop, its coverage at every sample size at once, the false-alarm rate of the
monitor checked every window against the fixed-n rules it replaces, a real degradation declared,
and the state and the sequence through `assay monitor`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray
from statsmodels.stats.proportion import confint_proportions_2indep
from typer.testing import CliRunner

from assay.cli import app
from assay.monitor.sequences import STATES, betting_cs, paired_difference_cs, states
from assay.stats import newcombe_diff

# --- reference: confseq's betting loop, ported ------------------------------------------------
# gostevehoward/confseq src/confseq/betting_strategies.py `lambda_predmix_eb` and
# src/confseq/betting.py `betting_mart` / `cs_from_martingale`, one candidate mean at a time,
# with the same bets for both bettors (WSR 2023 §4.2; confseq's `hedged_cs` passes its function
# to the negative side in a way that binds `m` to `truncation` — the paper's rule is used here).


def _reference_bets(x: NDArray[np.float64], alpha: float) -> NDArray[np.float64]:
    t = np.arange(1, len(x) + 1)
    mu_hat_t = np.minimum((1 / 2 + np.cumsum(x)) / (t + 1), 1)
    sigma2_t = (1 / 4 + np.cumsum(np.power(x - mu_hat_t, 2))) / (t + 1)
    sigma2_tminus1 = np.append(1 / 4, sigma2_t[0 : (len(x) - 1)])
    lambdas: NDArray[np.float64] = np.sqrt(
        2 * np.log(1 / alpha) / (t * np.log(1 + t) * sigma2_tminus1)
    )
    lambdas[np.isnan(lambdas)] = 0
    return lambdas


def _reference_mart(x: NDArray[np.float64], m: float, alpha: float) -> NDArray[np.float64]:
    lambdas = _reference_bets(x, alpha)
    mu_t = np.repeat(m, len(x))
    with np.errstate(divide="ignore"):
        positive = np.minimum(lambdas, (1 / 2) / mu_t)
        negative = np.minimum(lambdas, (1 / 2) / (1 - mu_t))
    capital_positive = np.cumprod(1 + positive * (x - mu_t))
    capital_negative = np.cumprod(1 - negative * (x - mu_t))
    return np.maximum(capital_positive / 2, capital_negative / 2)


def _reference_cs(
    x: NDArray[np.float64], alpha: float = 0.05, breaks: int = 1000
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    possible_m = np.arange(0, 1 + 1 / breaks, step=1 / breaks)
    confseq_mtx = np.zeros((len(possible_m), len(x)))
    for i in np.arange(0, len(possible_m)):
        confseq_mtx[i, :] = _reference_mart(x, possible_m[i], alpha) <= 1 / alpha
    lo, hi = np.zeros(len(x)), np.ones(len(x))
    for j in np.arange(0, len(x)):
        where_in_cs = np.where(confseq_mtx[:, j])
        if len(where_in_cs[0]):
            lo[j] = possible_m[where_in_cs[0][0]]
            hi[j] = possible_m[where_in_cs[0][-1]]
    return np.maximum(0, lo - 1 / breaks), np.minimum(1, hi + 1 / breaks)


@pytest.mark.parametrize(
    ("draw", "alpha"),
    [
        (lambda rng: rng.binomial(1, 0.8, 400), 0.05),
        (lambda rng: rng.beta(2, 5, 300), 0.05),
        (lambda rng: (rng.binomial(1, 0.7, 250) - rng.binomial(1, 0.75, 250) + 1) / 2, 0.1),
    ],
    ids=["bernoulli", "beta", "paired"],
)
def test_the_sequence_equals_a_port_of_confseqs_betting_loop(draw: Any, alpha: float) -> None:
    x = np.asarray(draw(np.random.default_rng(7)), dtype=np.float64)
    lo, hi = betting_cs(x, alpha)
    ref_lo, ref_hi = _reference_cs(x, alpha)
    # Both read the same grid; a bound may differ by one step where the log-capital and the
    # product straddle 1/α by rounding.
    assert np.abs(lo - ref_lo).max() <= 1e-3 + 1e-12
    assert np.abs(hi - ref_hi).max() <= 1e-3 + 1e-12
    assert np.mean(lo == ref_lo) > 0.99 and np.mean(hi == ref_hi) > 0.99


def test_the_sequence_covers_the_mean_at_every_size_at_once_and_narrows() -> None:
    rng = np.random.default_rng(11)
    x = rng.beta(2, 5, (1000, 200))
    lo, hi = betting_cs(x, 0.05, breaks=BREAKS)
    truth = 2 / 7
    ever_missed = ((lo > truth) | (hi < truth)).any(axis=1).mean()
    print(f"\nbetting CS, Beta(2,5), 1,000 streams x 200: ever missed the mean {ever_missed:.1%}")
    assert ever_missed <= 0.05
    means = np.cumsum(x, axis=1) / np.arange(1, 201)
    assert (lo <= means + 1e-9).all() and (means <= hi + 1e-9).all()
    assert lo.min() >= 0 and hi.max() <= 1
    assert np.median(hi[:, -1] - lo[:, -1]) < 0.5 * np.median(hi[:, 29] - lo[:, 29])


def test_observations_outside_the_unit_interval_are_refused() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        betting_cs([0.5, 1.2])


def test_states_are_sticky_and_never_flip_back() -> None:
    lo = np.array([-0.5, -0.3, -0.02, -0.06, -0.2, -0.3, -0.4])
    hi = np.array([0.5, 0.3, 0.10, 0.02, -0.08, 0.05, 0.02])
    assert [STATES[c] for c in states(lo, hi, 0.05)] == [
        "inconclusive",
        "inconclusive",
        "holding",
        "holding",
        "degraded",
        "degraded",
        "degraded",
    ]
    # Lower is better (a failure rate): the same difference, seen from the other side.
    assert STATES[states(-hi, -lo, 0.05, higher_is_better=False)[-1]] == "degraded"


# --- monitoring: false alarms when nothing changes, and a real degradation ---------------------

STREAMS, WINDOWS, PER_WINDOW, RATE = 1000, 30, 10, 0.85
BREAKS = 100
"""A coarser grid than the monitor's (0.02 on a difference): only wider, so no less valid."""


def _window_ends() -> NDArray[np.int64]:
    return np.arange(1, WINDOWS + 1) * PER_WINDOW - 1


def _sequence_alarms(candidate: NDArray[np.float64], baseline: NDArray[np.float64]) -> Any:
    """Per stream and window end: whether the monitor's state is `degraded` (margin 0)."""
    lo, hi = paired_difference_cs(candidate, baseline, breaks=BREAKS)
    return states(lo, hi, 0.0)[:, _window_ends()] == STATES.index("degraded")


def test_checked_every_window_the_sequence_alarms_rarely_and_fixed_n_rules_often() -> None:
    rng = np.random.default_rng(2026)
    shape = (STREAMS, WINDOWS * PER_WINDOW)
    candidate = rng.binomial(1, RATE, shape).astype(np.float64)
    baseline = rng.binomial(1, RATE, shape).astype(np.float64)
    sequence = _sequence_alarms(candidate, baseline).any(axis=1).mean()

    # The fixed-n interval the sequence replaces, recomputed at every window on everything so
    # far: the 95% Newcombe interval of candidate − baseline lies below 0.
    per_window = (STREAMS, WINDOWS, PER_WINDOW)
    so_far = np.arange(1, WINDOWS + 1) * PER_WINDOW
    _, upper = confint_proportions_2indep(
        candidate.reshape(per_window).sum(-1).cumsum(-1),
        so_far,
        baseline.reshape(per_window).sum(-1).cumsum(-1),
        so_far,
        method="newcomb",
        compare="diff",
    )
    cumulative = (upper < 0).any(axis=1).mean()

    # The monitor's own `completion_rate_drop` rule, window against previous window.
    completed = candidate.reshape(per_window).sum(-1).astype(int)
    threshold = 0
    for stream in completed:
        for now, before in zip(stream[1:], stream[:-1], strict=True):
            moved = newcombe_diff(int(now), PER_WINDOW, int(before), PER_WINDOW)
            if moved and (now - before) / PER_WINDOW < -0.05 and moved.hi < 0:
                threshold += 1
                break
    window_rule = threshold / STREAMS

    print(
        f"\nno change, {STREAMS} streams x {WINDOWS} windows x {PER_WINDOW} sessions, "
        f"checked every window: confidence sequence {sequence:.1%}, fixed-n Newcombe on all "
        f"data so far {cumulative:.1%}, completion_rate_drop (window vs previous) "
        f"{window_rule:.1%}"
    )
    assert sequence <= 0.05
    assert cumulative >= 0.10 and window_rule >= 0.20
    assert min(cumulative, window_rule) >= 5 * max(sequence, 0.01)


def test_a_real_degradation_is_declared_and_stays_declared() -> None:
    rng = np.random.default_rng(40)
    shape = (200, WINDOWS * PER_WINDOW)
    change_at = 4 * PER_WINDOW
    candidate = rng.binomial(1, RATE, shape).astype(np.float64)
    candidate[:, change_at:] = rng.binomial(1, 0.55, (200, shape[1] - change_at))
    baseline = rng.binomial(1, RATE, shape).astype(np.float64)
    alarms = _sequence_alarms(candidate, baseline)
    declared = alarms[:, -1].mean()
    before_change = alarms[:, 3].mean()
    first = np.argmax(alarms[alarms[:, -1]], axis=1) + 1
    print(
        f"\ncompletion 0.85 -> 0.55 after window 4: declared degraded in {declared:.0%}, "
        f"median at window {np.median(first):.0f}"
    )
    assert declared >= 0.95 and before_change <= 0.05
    assert (np.diff(alarms.astype(int), axis=1) >= 0).all()


# --- through `assay monitor` ------------------------------------------------------------------

NOW = datetime(2026, 6, 3, tzinfo=UTC)
SINCE = NOW - timedelta(hours=48)


def _signals(path: Path) -> Path:
    """48 hours of sessions: v1 completes 90%, v2 too until hour 12, then 50%."""
    rng = np.random.default_rng(3)
    lines = []
    for hour in range(48):
        for k in range(10):
            ended = SINCE + timedelta(hours=hour, minutes=5 * k + 1)
            for subject, rate in (
                ("agent:bot@v1", 0.9),
                ("agent:bot@v2", 0.9 if hour < 12 else 0.5),
            ):
                state = "completed" if rng.random() < rate else "failed"
                lines.append(
                    {
                        "session_id": f"{subject[-2:]}-{hour}-{k}",
                        "subject": subject,
                        "state": state,
                        "findings_count": 0,
                        "max_severity": "none",
                        "started_at": (ended - timedelta(minutes=1)).isoformat(),
                        "ended_at": ended.isoformat(),
                    }
                )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.usefixtures("prefect_api")
def test_assay_monitor_shows_the_state_and_the_sequence_and_keeps_the_margin(
    store_dir: Path, tmp_path: Path
) -> None:
    signals = str(_signals(tmp_path / "signals.jsonl"))
    plan = ["--since", SINCE.isoformat(), "--baseline", "agent:bot@v1", "--margin", "0.05"]
    args = ["monitor", signals, "--window", "6h", "--now", NOW.isoformat(), *plan]
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    sequences = report["sequences"]
    assert sequences["registered"]["plan"]["margin"] == 0.05
    by_subject = {s["subject"]: s for s in sequences["subjects"]}
    assert by_subject["agent:bot@v1"]["paired"] is None
    paired = by_subject["agent:bot@v2"]["paired"]
    assert paired["state"] == "degraded" and paired["baseline"] == "agent:bot@v1"
    rows = paired["rows"]
    assert [row["end"][:13] for row in rows] == [
        (SINCE + timedelta(hours=6 * k)).isoformat()[:13] for k in range(1, 9)
    ]
    assert rows[0]["state"] != "degraded" and rows[-1]["pairs"] == 480
    # Under a change the sequence lags the raw mean (its bets weigh early pairs more): it bounds
    # the average difference over the whole plan, so only the order of its bounds is checked.
    assert all(row["lo"] < row["hi"] for row in rows)
    assert [row["state"] for row in rows].count("degraded") >= 3
    completion = next(r for r in by_subject["agent:bot@v2"]["rates"] if r["signal"] == "completion")
    assert completion["rows"][-1]["n"] == 480
    v2 = next(s for s in report["subjects"] if s["subject"] == "agent:bot@v2")
    assert v2["status"] == "alert"
    assert [c["threshold"] for c in v2["findings"]] == ["sequence_margin"]
    saved = json.loads((store_dir / "monitor" / f"{report['report_id']}.json").read_text())
    assert saved["sequences"]["subjects"][1]["paired"]["state"] == "degraded"
    assert list((store_dir / "monitor" / "plans").glob("*.json"))

    human = CliRunner().invoke(app, args)
    assert human.exit_code == 0, human.output
    assert "degraded against agent:bot@v1" in human.output
    assert "margin 0.05" in human.output and "pairs" in human.output

    moved = CliRunner().invoke(app, [*args[:-1], "0.20"])
    assert moved.exit_code == 2
    assert "pre-registered plan cannot change" in moved.output
    assert "Traceback" not in moved.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "agent:bot@v1"], "--baseline needs --since"),
        (["--since", "yesterday"], "--since: not an ISO 8601 time"),
        (["--since", SINCE.isoformat(), "--margin", "2"], "--margin:"),
        (["--since", SINCE.isoformat(), "--baseline", "bad subject"], "--baseline:"),
    ],
)
def test_a_malformed_plan_is_one_line_exit_2_before_any_run(
    store_dir: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    signals = str(_signals(tmp_path / "signals.jsonl"))
    result = CliRunner().invoke(app, ["monitor", signals, "--now", NOW.isoformat(), *args])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (store_dir / "monitor").exists()
