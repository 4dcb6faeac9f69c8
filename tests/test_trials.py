"""Agent trials end to end (issue 25): outputs with `trial`, cases decided over their trials,
the EvalResult's `trials` and `clustered` figures against independent computations, the paired
comparison over trials, the minimum detectable drop, non-inferiority and what-if gates.

Suite runs go through the real flows on the session's Prefect API; the what-if gate is checked
against a counting judge server and over HTTP against `assay serve`.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import httpx
import junitparser
import numpy as np
import pytest
import scipy.stats
import statsmodels.api as sm
import yaml
from scipy.optimize import brentq
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_effectsize
from typer.testing import CliRunner

from assay.cli import app
from assay.errors import InputError
from assay.findings import list_findings
from assay.runs.render import markdown_summary
from assay.runs.scorecard import scorecard
from assay.store import FileStore
from assay.suites.suite import load_suite, parse_suite
from tests.api_service import start_service
from tests.judge_server import JudgeServer, verdict
from tests.launched import gate, suite_run
from tests.test_coverage import EXAMPLE_HASH
from tests.test_minimal_data import _files_containing, _flush_prefect_logs, _prefect_database_dir

pytestmark = pytest.mark.usefixtures("prefect_api")

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CANARY = "CANARY-trials-7d1e-never-stored"

TABLE: dict[str, list[bool]] = {
    "t00": [True, True, True],
    "t01": [True, False, True, True],
    "t02": [False, False, False],
    "t03": [True, True, True, True, True],
    "t04": [False, True, False, False],
    "t05": [True, True, False],
    "t06": [True, True, True, True],
    "t07": [False, False, True, False, True],
    "t08": [True, True, True],
    "t09": [False, True, True],
}
"""Each case's trial outcomes: passes say `ok`, failures do not."""


def _suite(
    tmp_path: Path,
    name: str,
    cases: list[str],
    clusters: dict[str, str] | None = None,
    **fields: object,
) -> str:
    path = tmp_path / f"{name}-{hashlib.sha1(repr(fields).encode()).hexdigest()[:6]}.yaml"
    listed = [
        {"id": case, "input": f"q {case}", **({"cluster": clusters[case]} if clusters else {})}
        for case in cases
    ]
    suite = {
        "suite": name,
        "pass_threshold": 0.5,
        "regression_threshold": 0.05,
        "defaults": [{"contains": "ok"}],
        **fields,
        "cases": listed,
    }
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return str(path)


def _trial_outputs(tmp_path: Path, name: str, table: dict[str, list[bool]]) -> str:
    """Trial-major order, so a case's trials are spread over the file (and over chunks)."""
    path = tmp_path / f"{name}.jsonl"
    longest = max(len(t) for t in table.values())
    lines = []
    for trial in range(longest):
        for case, outcomes in table.items():
            if trial < len(outcomes):
                text = ("ok " if outcomes[trial] else "no ") + CANARY
                lines.append(json.dumps({"case_id": case, "trial": trial + 1, "output": text}))
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _miller_se(table: dict[str, list[bool]]) -> tuple[float, float]:
    """Mean and Miller eq. 4 SE, from statsmodels' cluster-robust OLS (no correction) plus the
    n − 1 of eq. 1's CLT term (see test_trials_stats for the literal double sum)."""
    values = np.array([float(x) for t in table.values() for x in t])
    groups = np.array([case for case, t in table.items() for _ in t])
    n = len(values)
    fit = sm.OLS(values, np.ones(n)).fit(
        cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False}
    )
    extra = ((values - values.mean()) ** 2).sum() / (n**2 * (n - 1))
    return float(values.mean()), math.sqrt(float(fit.bse[0]) ** 2 + extra)


def test_a_trial_run_reports_every_figure_as_computed_independently(
    store_dir: Path, tmp_path: Path
) -> None:
    suite = _suite(tmp_path, "trials", list(TABLE))
    outputs = _trial_outputs(tmp_path, "agent", TABLE)
    result = suite_run(suite=suite, outputs=outputs, subject="agent:a@v1", chunk_size=7)

    figures = result.trials
    assert figures is not None
    assert (figures.cases, figures.trials) == (10, sum(map(len, TABLE.values())))
    assert (figures.k_min, figures.k_max) == (3, 5)
    mean, se = _miller_se(TABLE)
    assert figures.pass_rate.rate == pytest.approx(mean, abs=1e-6)
    assert figures.pass_rate.se == pytest.approx(se, abs=1e-6)
    z = scipy.stats.norm.ppf(0.975)
    assert figures.pass_rate.lo == pytest.approx(mean - z * se, abs=1e-6)
    assert figures.pass_rate.hi == pytest.approx(mean + z * se, abs=1e-6)
    for k in (1, 2, 3):
        comb = scipy.special.comb
        at_k = np.mean([1 - comb(len(t) - sum(t), k) / comb(len(t), k) for t in TABLE.values()])
        pow_k = np.mean([comb(sum(t), k) / comb(len(t), k) for t in TABLE.values()])
        assert figures.pass_at_k[str(k)] == pytest.approx(at_k, abs=1e-6)
        assert figures.pass_pow_k[str(k)] == pytest.approx(pow_k, abs=1e-6)
    flaky = [c for c, t in TABLE.items() if 0 < sum(t) < len(t)]
    assert figures.flaky_cases == len(flaky) and figures.flaky == sorted(flaky)

    # The run's verdict is per case under `all`: the Prefect state keeps the case pass rate.
    all_pass = sum(all(t) for t in TABLE.values())
    assert (result.metrics.cases, result.metrics.passed, result.metrics.scored) == (
        10,
        all_pass,
        10,
    )
    assert result.pass_rate == all_pass / 10
    assert result.metrics.checks_by_kind["contains"].scored == figures.trials

    summary = markdown_summary(result)
    assert "pass@3" in summary and "pass^3" in summary and "Miller" in summary
    row = scorecard(FileStore(store_dir), subject="agent:a@v1")[0]
    assert f"pass^1 {figures.pass_pow_k['1']:.3f}" in row.latest_trials

    # JUnit: one test case per case, the trial counts in its message.
    junit = tmp_path / "j.xml"
    gated = CliRunner().invoke(
        app, ["gate", suite, "--outputs", outputs, "--junit", str(junit), "--json"]
    )
    assert gated.exit_code == 1, gated.output  # 4/10 cases pass every trial: below 0.5
    cases = next(s for s in junitparser.JUnitXml.fromfile(str(junit)) if "·" in s.name)
    assert cases.tests == 10 and cases.failures == 10 - all_pass
    messages = {c.name: (c.result[0].message if c.result else c.system_out) for c in cases}
    assert messages["t01"] == "3/4 trials passed (all)"
    assert messages["t00"] == "3/3 trials passed (all)"

    # `assay runs cases` lists every trial, numbered
    listed = CliRunner().invoke(app, ["runs", "cases", result.run_id, "--json"])
    trials = json.loads(listed.stdout)
    assert sorted((t["case_id"], t["trial"]) for t in trials) == sorted(
        (case, n + 1) for case, outcomes in TABLE.items() for n in range(len(outcomes))
    )
    table = CliRunner().invoke(app, ["runs", "cases", result.run_id, "--status", "failed"])
    assert "t01 #2" in table.stdout


def test_case_passes_policies_and_min_trials_change_case_verdicts(
    store_dir: Path, tmp_path: Path
) -> None:
    outputs = _trial_outputs(tmp_path, "agent", TABLE)
    expected = {
        "all": sum(all(t) for t in TABLE.values()),
        "majority": sum(2 * sum(t) > len(t) for t in TABLE.values()),
        "any": sum(any(t) for t in TABLE.values()),
    }
    assert len(set(expected.values())) == 3
    for policy, passed in expected.items():
        suite = _suite(tmp_path, f"policy-{policy}", list(TABLE), trials={"case_passes": policy})
        result = suite_run(suite=suite, outputs=outputs, subject=f"agent:{policy}")
        assert (result.metrics.passed, result.metrics.scored) == (passed, 10), policy

    # min 4: the cases with 3 trials that are not already failed are a coverage shortfall.
    strict = _suite(tmp_path, "policy-min", list(TABLE), trials={"min": 4})
    result = suite_run(suite=strict, outputs=outputs, subject="agent:min")
    short = [c for c, t in TABLE.items() if len(t) < 4 and all(t)]
    assert result.metrics.incomplete == len(short) == 2
    assert not result.passed and result.verdict_reason == "coverage 8/10 below 0.95"


def test_a_duplicate_case_and_trial_is_exit_2_naming_both_lines(
    store_dir: Path, tmp_path: Path
) -> None:
    suite = _suite(tmp_path, "dup", ["a", "b"])
    outputs = tmp_path / "dup.jsonl"
    outputs.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {"case_id": "a", "trial": 1, "output": CANARY},
                {"case_id": "a", "trial": 2, "output": CANARY},
                {"case_id": "b", "trial": 1, "output": CANARY},
                {"case_id": "a", "trial": 2, "output": CANARY},
            )
        )
        + "\n"
    )
    result = CliRunner().invoke(app, ["run", suite, "--outputs", str(outputs)])
    assert result.exit_code == 2
    message = result.stderr.strip()
    assert message == (
        f"error: {outputs} line 4, field trial: duplicate output for case 'a' trial 2 "
        f"(first at {outputs} line 2)"
    )
    assert CANARY not in result.output
    assert not (store_dir / "runs").exists()


def test_trial_outputs_never_reach_the_store_or_prefect(store_dir: Path, tmp_path: Path) -> None:
    suite = _suite(tmp_path, "canary-trials", list(TABLE), clusters={c: "one" for c in TABLE})
    result = suite_run(suite=suite, outputs=_trial_outputs(tmp_path, "agent", TABLE))
    assert result.trials is not None and result.clustered is not None
    _flush_prefect_logs()
    needle = CANARY.encode()
    assert _files_containing(store_dir, needle) == []
    assert _files_containing(_prefect_database_dir(), needle) == []


def test_two_trial_runs_are_compared_by_paired_differences(store_dir: Path, tmp_path: Path) -> None:
    suite = _suite(tmp_path, "paired", list(TABLE))
    worse = {c: [False, *t[1:]] if c < "t06" else t for c, t in TABLE.items()}
    base = suite_run(suite=suite, outputs=_trial_outputs(tmp_path, "v1", TABLE), subject="agent:p")
    cand = suite_run(
        suite=suite,
        outputs=_trial_outputs(tmp_path, "v2", worse),
        subject="agent:p",
        baseline=base.run_id,
    )
    comparison = cand.regression
    assert comparison is not None and comparison.trials is not None
    before = np.array([np.mean(TABLE[c]) for c in TABLE])
    after = np.array([np.mean(worse[c]) for c in TABLE])
    d = before - after
    se = float(scipy.stats.sem(d))
    assert comparison.trials.cases == 10
    assert comparison.trials.mean_diff == pytest.approx(d.mean(), abs=1e-6)
    assert comparison.trials.se == pytest.approx(se, abs=1e-6)
    z = scipy.stats.norm.ppf(0.975)
    lo, hi = comparison.trials.interval
    assert (lo, hi) == pytest.approx((d.mean() - z * se, d.mean() + z * se), abs=1e-6)
    assert lo > 0 and comparison.score_drop is not None and comparison.score_drop > 0.05
    assert comparison.status == "regressed"
    finding = next(f for f in list_findings(FileStore(store_dir)) if f.run_id == cand.run_id)
    assert f"(drop 95% CI {lo:.3f} to {hi:.3f}, paired over trials)" in finding.summary

    # The smallest drop these two runs could see: statsmodels' power solution, as a rate.
    p1 = comparison.baseline.passed / comparison.baseline.scored  # type: ignore[union-attr]
    h = NormalIndPower().solve_power(effect_size=None, nobs1=10, alpha=0.05, power=0.8, ratio=1)
    lowest = brentq(lambda p2: proportion_effectsize(p1, p2) - h, 1e-12, p1)
    assert comparison.minimum_detectable_drop == pytest.approx(p1 - lowest, abs=1e-4)
    assert comparison.blind_to_threshold is False  # it regressed


def test_identical_runs_are_insufficient_evidence_at_a_tight_margin_and_pass_at_a_wide_one(
    store_dir: Path, tmp_path: Path
) -> None:
    cases = [f"c{i:02d}" for i in range(50)]
    outputs = tmp_path / "same.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": c, "output": "ok" if i % 10 else "no"}) + "\n"
            for i, c in enumerate(cases)
        )
    )
    runner = CliRunner()
    tight = _suite(tmp_path, "noninf", cases, non_inferiority_margin=0.01)
    first = runner.invoke(app, ["gate", tight, "--outputs", str(outputs), "--json"])
    assert first.exit_code == 1  # no baseline: no evidence of non-inferiority
    assert json.loads(first.stdout)["verdict"] == "insufficient_evidence"

    second = runner.invoke(app, ["gate", tight, "--outputs", str(outputs), "--json"])
    assert second.exit_code == 1, second.output
    payload = json.loads(second.stdout)
    assert payload["verdict"] == "insufficient_evidence"
    assert [r["rule"] for r in payload["reasons"]] == ["insufficient_evidence"]
    regression = payload["result"]["regression"]
    assert regression["status"] == "no_regression"
    bound = regression["paired"]["interval"][1]  # the cases are shared: the paired bound
    assert 0.01 < bound < 0.5
    assert f"{bound:.4f}" in payload["reasons"][0]["message"]
    assert "margin 0.01" in payload["reasons"][0]["message"]
    allowed = runner.invoke(app, ["gate", tight, "--outputs", str(outputs), "--allow-insufficient"])
    assert allowed.exit_code == 0, allowed.output

    wide = _suite(tmp_path, "noninf", cases, non_inferiority_margin=0.5)
    third = runner.invoke(app, ["gate", wide, "--outputs", str(outputs), "--json"])
    assert third.exit_code == 0, third.output
    assert json.loads(third.stdout)["verdict"] == "pass"


@pytest.fixture
def counting_judge(judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch) -> JudgeServer:
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "judge-whatif-1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    judge_server.script(default=verdict("pass", 0.9))
    return judge_server


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_what_if_gate_calls_no_judge_and_records_nothing(
    store_dir: Path, tmp_path: Path, counting_judge: JudgeServer
) -> None:
    cases = [f"w{i}" for i in range(10)]
    suite = tmp_path / "whatif.yaml"
    suite.write_text(
        yaml.safe_dump(
            {
                "suite": "whatif",
                "pass_threshold": 0.5,
                "cases": [
                    {
                        "id": c,
                        "input": "q",
                        "scorers": [{"contains": "ok"}, {"llm_judge": {"rubric": "Polite."}}],
                    }
                    for c in cases
                ],
            }
        )
    )
    outputs = tmp_path / "w.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": c, "output": "ok" if i < 7 else "no"}) + "\n"
            for i, c in enumerate(cases)
        )
    )
    run = gate(suite=str(suite), outputs=str(outputs))
    run_id = run.decision.run_id
    assert run.decision.verdict == "fail"  # judge_uncalibrated
    calls = len(counting_judge.requests)
    assert calls > 0
    recorded = (store_dir / "gates" / f"{run_id}.json").read_bytes()
    before = _snapshot(store_dir)

    runner = CliRunner()
    strict = runner.invoke(app, ["gate", "--check", run_id, "--pass-threshold", "0.9", "--json"])
    assert strict.exit_code == 1, strict.output
    what_if = json.loads(strict.stdout)
    assert what_if["what_if"] is True and what_if["run_id"] == run_id
    assert "pass_rate_below_threshold" in [r["rule"] for r in what_if["reasons"]]
    rule = next(r for r in what_if["rules"] if r["rule"] == "pass_rate_below_threshold")
    assert rule["detail"] == "pass rate 0.700 (7/10) vs threshold 0.90"
    loose = runner.invoke(
        app,
        ["gate", "--check", run_id, "--pass-threshold", "0.6", "--min-coverage", "0.5", "--json"],
    )
    loose_rules = {r["rule"]: r["passed"] for r in json.loads(loose.stdout)["rules"]}
    assert loose_rules["pass_rate_below_threshold"] and loose_rules["coverage"]
    flips = runner.invoke(
        app,
        [
            "gate",
            "--check",
            run_id,
            "--pass-threshold",
            "0.6",
            "--max-judge-flip-rate",
            "0.1",
            "--json",
        ],
    )
    assert "judge_flip_rate" in [r["rule"] for r in json.loads(flips.stdout)["reasons"]]

    assert len(counting_judge.requests) == calls  # no judge call
    assert (store_dir / "gates" / f"{run_id}.json").read_bytes() == recorded
    assert _snapshot(store_dir) == before  # nothing recorded at all
    bad = runner.invoke(app, ["gate", "--pass-threshold", "0.9"])
    assert bad.exit_code == 2


def test_post_gate_what_if_over_http(
    tmp_path: Path, prefect_api: str, counting_judge: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = start_service(tmp_path / "svc", prefect_api_url=prefect_api)
    try:
        monkeypatch.setenv("ASSAY_STORE", f"file://{service.store_dir}")
        suite = _suite(tmp_path, "http-whatif", ["h1", "h2", "h3", "h4"])
        outputs = tmp_path / "h.jsonl"
        outputs.write_text(
            "".join(
                json.dumps({"case_id": f"h{i}", "output": "ok" if i < 4 else "no"}) + "\n"
                for i in range(1, 5)
            )
        )
        run = gate(suite=suite, outputs=str(outputs))
        run_id = run.decision.run_id
        recorded = (service.store_dir / "gates" / f"{run_id}.json").read_bytes()
        with service.client("viewer") as client:
            answer = client.post("/gate/what-if", json={"run_id": run_id, "pass_threshold": 1.0})
            assert answer.status_code == 200, answer.text
            assert answer.json()["what_if"] is True and answer.json()["verdict"] == "fail"
            bad = client.post("/gate/what-if", json={"run_id": run_id, "pass_threshold": 2})
            assert bad.status_code == 422
            assert bad.headers["content-type"].startswith("application/problem+json")
            missing = client.post("/gate/what-if", json={"run_id": "nope", "pass_threshold": 0.5})
            assert missing.status_code == 404
        with httpx.Client(base_url=service.url) as anonymous:
            assert (
                anonymous.post(
                    "/gate/what-if", json={"run_id": run_id, "pass_threshold": 0.5}
                ).status_code
                == 401
            )
        assert (service.store_dir / "gates" / f"{run_id}.json").read_bytes() == recorded
    finally:
        service.stop()


def test_suite_power_prints_statsmodels_solution(store_dir: Path, tmp_path: Path) -> None:
    suite = _suite(tmp_path, "power", [f"p{i}" for i in range(40)])
    result = CliRunner().invoke(app, ["suite", "power", suite, "--baseline-rate", "0.85", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    h = NormalIndPower().solve_power(effect_size=None, nobs1=40, alpha=0.05, power=0.8, ratio=1)
    lowest = brentq(lambda p2: proportion_effectsize(0.85, p2) - h, 1e-12, 0.85)
    assert payload["cases"] == 40
    assert payload["minimum_detectable_drop"] == pytest.approx(0.85 - lowest, abs=1e-4)
    text = CliRunner().invoke(app, ["suite", "power", suite, "--baseline-rate", "0.85"])
    assert "will mostly go undetected" in text.stdout  # 40 cases cannot see a 0.05 drop


def test_suites_without_the_new_fields_keep_their_hash() -> None:
    example = EXAMPLES / "support-suite.yaml"
    suite = load_suite(example)
    assert suite.content_hash == EXAMPLE_HASH
    text = example.read_text()
    for changed in (
        text.replace("pass_threshold:", "trials: {min: 3}\npass_threshold:", 1),
        text.replace("pass_threshold:", "non_inferiority_margin: 0.02\npass_threshold:", 1),
    ):
        assert parse_suite(changed, "changed.yaml").content_hash != EXAMPLE_HASH


@pytest.mark.parametrize("rate", ["0", "0.02"])
def test_suite_power_says_when_a_suite_cannot_see_any_drop(
    store_dir: Path, tmp_path: Path, rate: str
) -> None:
    suite = _suite(tmp_path, "blind", ["a", "b", "c"])
    shown = CliRunner().invoke(app, ["suite", "power", suite, "--baseline-rate", rate, "--json"])
    assert json.loads(shown.stdout)["detects_any_drop"] is False
    text = CliRunner().invoke(app, ["suite", "power", suite, "--baseline-rate", rate])
    assert "no drop can be detected with 80% power" in " ".join(text.stdout.split())
    assert "0.0000" not in text.stdout


@pytest.mark.parametrize("margin", ["0.02", True])
def test_a_non_inferiority_margin_must_be_a_number(tmp_path: Path, margin: object) -> None:
    suite = _suite(tmp_path, "strict", ["a"], non_inferiority_margin=margin)
    with pytest.raises(InputError) as info:
        load_suite(suite)
    assert info.value.field == "non_inferiority_margin"
