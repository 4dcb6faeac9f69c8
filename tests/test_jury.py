"""Juries (#38, item 2): a judge setting naming three judges, each judging as the only judge —
its own cache entries, budget reservation, prices, key, repeats and redaction — and the jury's
verdict by `majority`, `unanimous` or `mean`; Krippendorff's alpha against the `krippendorff`
package; the effective number of votes; `--plan` counting jurors; the jury admitted as a whole.

The three jurors are three models on the local OpenAI-compatible judge server, each with its own
scripted behaviour (`_jurors`), asked through the real `openai` SDK.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import krippendorff
import numpy as np
import pytest
import yaml
from scipy.stats import pearsonr  # type: ignore[import-untyped]

from assay.admission.admit import AdmissionAsk, admit
from assay.admission.battery import load_battery
from assay.admission.record import summary
from assay.errors import InputError
from assay.finops.budget import Budget
from assay.hashing import OutputHasher, store_secret
from assay.judge.agreement import (
    effective_votes,
    jury_agreement,
    krippendorff_alpha,
    mean_correlation,
)
from assay.judge.cache import cache_key
from assay.judge.config import JudgeConfig
from assay.judge.jury import aggregate, aggregate_pairs
from assay.judge.port import JUDGE_SPLIT, JudgePin, JudgeRequest, PairVerdict, Verdict
from assay.judge.service import JudgeSetup, judge_repeated
from assay.judge.spending import Spender
from assay.runs.cost_plan import plan_run
from assay.runs.options import RunOptions
from assay.store import FileStore
from blocks.judge_settings import JudgeSettings, judge_setup
from tests.judge_grading import grades_by_reference
from tests.judge_server import JudgeServer, Policy, RecordedRequest, Reply, verdict
from tests.launched import suite_run
from tests.test_admission import _calibration_set

JURORS = ("juror-a", "juror-b", "juror-c")
ITEMS = 12
FLIPPED = {"juror-a": set(), "juror-b": {1, 4, 7, 10}, "juror-c": {4, 5, 8}}
"""Items each juror gets wrong on purpose (an honest verdict, flipped)."""
SCORES = {"juror-a": (1.0, 0.2), "juror-b": (0.7, 0.3), "juror-c": (0.7, 0.3)}
"""Each juror's score for a pass and for a fail: a confident first juror outweighs two
hesitant ones under `mean`."""
INPUT_PRICES = {"juror-a": 1.0, "juror-b": 2.0, "juror-c": 3.0}
KEYS = {"juror-a": "sk-a", "juror-b": "sk-b", "juror-c": "sk-c"}
EMAIL = "ana.lopez@example.com"


def _by_model(policies: dict[str, Policy]) -> Policy:
    def policy(recorded: RecordedRequest) -> Reply:
        return policies[str(recorded.body["model"])](recorded)

    return policy


def _scripted(name: str) -> Policy:
    """An honest grader by reference, wrong on purpose on the items marked `flip-<name>`."""
    honest = grades_by_reference()

    def policy(recorded: RecordedRequest) -> Reply:
        assert recorded.headers["authorization"] == f"Bearer {KEYS[name]}"  # its own key
        passed = json.loads(honest(recorded).content or "{}")["verdict"] == "pass"
        passed ^= f"flip-{name}" in recorded.text("user")
        high, low = SCORES[name]
        return verdict("pass" if passed else "fail", high if passed else low)

    return policy


def _expected(item: int) -> dict[str, bool]:
    """Whether each juror passes item `item` (even items hold the reference answer)."""
    return {name: (item % 2 == 0) ^ (item in FLIPPED[name]) for name in JURORS}


@pytest.fixture
def jury_env(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Callable[..., Path]:
    """Configure the judge server's three models as a jury, by the environment (one judge,
    two more jurors in a YAML file); returns a function (re)writing the jury file."""
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "juror-a")
    monkeypatch.setenv("OPENAI_API_KEY", KEYS["juror-a"])
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", str(INPUT_PRICES["juror-a"]))
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "0")
    monkeypatch.setenv("JUROR_B_KEY", KEYS["juror-b"])
    monkeypatch.setenv("JUROR_C_KEY", KEYS["juror-c"])
    judge_server.script(default=_by_model({name: _scripted(name) for name in JURORS}))
    path = tmp_path / "jury.yaml"

    def write(aggregation: str = "majority", models: tuple[str, ...] = JURORS[1:]) -> Path:
        jurors = [
            {
                "model": model,
                "api_key_env": f"JUROR_{model[-1].upper()}_KEY",
                "input_price_per_million": INPUT_PRICES[model],
            }
            for model in models
        ]
        path.write_text(yaml.safe_dump({"aggregation": aggregation, "jurors": jurors}))
        monkeypatch.setenv("ASSAY_JUDGE_JURY", str(path))
        return path

    write()
    return write


def _jury(budgets: list[Budget] | None = None, fresh: bool = False) -> JudgeSetup:
    settings = JudgeSettings.from_env()
    assert settings is not None
    return settings.judge_setup(budgets or [], fresh)


def _requests(store: FileStore, setup: JudgeSetup) -> list[tuple[str, JudgeRequest]]:
    hasher = OutputHasher(store_secret(store))
    asked = []
    for item in range(ITEMS):
        answer = f"answer{item}" if item % 2 == 0 else f"answer{item + 100}"
        marks = " ".join(f"flip-{name}" for name in JURORS if item in FLIPPED[name])
        output = f"It is {answer}. Write to {EMAIL}. {marks}"
        request = JudgeRequest(
            case_id=f"c{item:02d}",
            input=f"question {item}",
            expected=f"answer{item}",
            rubric="Gives the reference answer.",
            output=output,
        )
        content = {"case": item, "output": hasher(output)}
        asked.append((cache_key(hasher, "check", setup.pin, content), request))
    return asked


def _judge(store: FileStore, setup: JudgeSetup, run_id: str) -> tuple[int, list[Verdict]]:
    spender = Spender(run_id, "jury-suite", "agent:jury", datetime.now(UTC))
    batch, repeats = judge_repeated(store, setup, _requests(store, setup), spender, chunk=0)
    assert all(len(verdicts) == setup.repeats for verdicts in repeats)
    return batch.calls, [verdicts[0] for verdicts in repeats]


@pytest.mark.parametrize("aggregation", ["majority", "unanimous", "mean"])
def test_a_jury_aggregates_its_jurors_each_asked_alone_and_cached_under_its_pin(
    jury_env: Callable[..., Path], judge_server: JudgeServer, tmp_path: Path, aggregation: str
) -> None:
    jury_env(aggregation)
    store = FileStore(tmp_path / "evidence")
    setup = _jury()
    assert setup.model == f"jury:{aggregation}[juror-a+juror-b+juror-c]"

    calls, verdicts = _judge(store, setup, "jury-run")
    assert calls == 3 * ITEMS
    asked = [str(r.body["model"]) for r in judge_server.requests]
    assert sorted(asked) == sorted(JURORS * ITEMS)
    assert all(EMAIL not in r.text("user") for r in judge_server.requests)  # each redacted

    for item, jury_verdict in enumerate(verdicts):
        passes = _expected(item)
        if aggregation == "majority":
            expected = sum(passes.values()) >= 2
        elif aggregation == "unanimous":
            expected = all(passes.values())
        else:
            scores = [SCORES[name][0 if passed else 1] for name, passed in passes.items()]
            expected = float(np.mean(scores)) >= 0.5
        assert jury_verdict.status == ("pass" if expected else "fail"), item
        assert jury_verdict.model == setup.model
    if aggregation == "mean":  # a confident juror outweighs two hesitant ones
        assert verdicts[4].status == "pass" and sum(_expected(4).values()) == 1

    again, cached = _judge(store, setup, "jury-rerun")
    assert again == 0 and len(judge_server.requests) == 3 * ITEMS  # every juror's entry cached
    assert [v.status for v in cached] == [v.status for v in verdicts]


def test_repeats_budget_reservations_and_the_ledger_are_per_juror(
    jury_env: Callable[..., Path], judge_server: JudgeServer, tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    budget = Budget(name="jury-roomy", limit_usd=100, period="day", mode="block")
    setup = _jury([budget])
    setup.repeats = 2
    calls, _ = _judge(store, setup, "jury-budgeted")
    assert calls == 2 * 3 * ITEMS
    for name in JURORS:
        assert sum(r.body["model"] == name for r in judge_server.requests) == 2 * ITEMS

    reservations = [
        json.loads(store.get(key))
        for key in store.list("reservations/")
        if not key.endswith(".released")  # the markers of reservations given back
    ]
    held = sorted(r["amount_usd"] for r in reservations if r["run_id"] == "jury-budgeted")
    assert len(held) == 3  # one per juror, each at its own prices (input only: 1, 2, 3 $/M)
    assert held[1] / held[0] == pytest.approx(2) and held[2] / held[0] == pytest.approx(3)

    summaries = [json.loads(store.get(k)) for k in store.list("costs/") if "-s" in k]
    by_model = {s["model"]: s for s in summaries if s["run_id"] == "jury-budgeted"}
    assert set(by_model) == set(JURORS)
    for name in JURORS:  # the server bills 120 prompt tokens a call
        record = by_model[name]
        assert record["calls"] == 2 * ITEMS
        assert record["cost_usd"] == pytest.approx(2 * ITEMS * 120 * INPUT_PRICES[name] / 1e6)


def test_alpha_equals_the_krippendorff_package_and_effective_votes_are_reported(
    jury_env: Callable[..., Path], tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "evidence")
    setup = _jury()
    spender = Spender("jury-alpha", "jury-suite", "agent:jury", datetime.now(UTC))
    batch, _ = judge_repeated(store, setup, _requests(store, setup), spender, chunk=0)
    assert batch.by_juror is not None
    agreement = jury_agreement(batch.by_juror, "majority")

    passes = [[float(v.status == "pass") for v in row] for row in batch.by_juror]
    scores = [[v.score for v in row] for row in batch.by_juror]
    nominal = krippendorff.alpha(reliability_data=passes, level_of_measurement="nominal")
    interval = krippendorff.alpha(reliability_data=scores, level_of_measurement="interval")
    assert agreement.alpha_verdicts == pytest.approx(nominal, abs=1e-6)
    assert agreement.alpha_scores == pytest.approx(interval, abs=1e-6)
    assert (agreement.jurors, agreement.items) == (3, ITEMS)

    rho = np.mean([pearsonr(passes[i], passes[j]).statistic for i, j in ((0, 1), (0, 2), (1, 2))])
    assert agreement.mean_correlation == pytest.approx(rho, abs=1e-12)
    assert agreement.effective_votes == pytest.approx(3 / (1 + 2 * rho), abs=1e-12)
    assert agreement.effective_votes is not None and 1 < agreement.effective_votes < 3


def test_alpha_matches_the_reference_with_missing_values() -> None:
    rng = np.random.default_rng(38)
    for level in ("nominal", "interval"):
        for _ in range(20):
            data = rng.integers(0, 4, size=(3, 25)).astype(float)
            data[rng.random(data.shape) < 0.2] = np.nan
            units = [[None if np.isnan(v) else float(v) for v in unit] for unit in data.T]
            ours = krippendorff_alpha(units, level)
            reference = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
            assert ours == pytest.approx(reference, abs=1e-6)


def test_effective_votes_on_hand_checkable_juries() -> None:
    orthogonal = [[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1]]  # pairwise correlations all 0
    assert mean_correlation(orthogonal) == pytest.approx(0.0)
    assert effective_votes(3, mean_correlation(orthogonal)) == pytest.approx(3.0)
    identical = [[1, 1, 0, 0]] * 3  # one vote, said three times
    assert effective_votes(3, mean_correlation(identical)) == pytest.approx(1.0)
    two_and_one = [[1, 1, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0]]  # ρ = 1, 0, 0: ρ̄ = 1/3
    assert effective_votes(3, mean_correlation(two_and_one)) == pytest.approx(3 / (1 + 2 / 3))
    opposed = [[1, 1, 0, 0], [0, 0, 1, 1]]  # ρ = −1, floored at 0: never more than k
    assert effective_votes(2, mean_correlation(opposed)) == pytest.approx(2.0)
    constant = [[1, 1, 1, 1], [1, 1, 0, 0]]  # a juror that always passes: ρ undefined
    assert mean_correlation(constant) is None and effective_votes(2, None) is None
    # Only the items both answered count: jurors 1 and 2 share items 0 and 3, where juror 1 is
    # constant (undefined), 1 and 3 share items 2 and 3, where juror 3 is (undefined), and 2 and
    # 3 share items 1 and 3, where they agree (ρ = 1): ρ̄ = 1, one vote.
    missing = [[1, None, 0, 1], [1, 1, None, 0], [None, 1, 0, 0]]
    assert mean_correlation(missing) == pytest.approx(1.0)
    assert effective_votes(3, 1.0) == pytest.approx(1.0)


def _votes(*statuses: str, scores: tuple[float, ...] = ()) -> list[Verdict]:
    found = []
    for i, status in enumerate(statuses):
        if status == "skipped":
            found.append(Verdict.skipped("budget_blocked", model=f"m{i}"))
        else:
            score = scores[i] if scores else float(status == "pass")
            found.append(Verdict(status=status, score=score, reason="judged"))
    return found


def test_aggregation_rules_fail_closed() -> None:
    pin = JudgePin(model="jury:x[a+b+c]", prompt_version="default@x")
    asked = JudgeRequest(case_id="c", input="q", rubric="r", output="o")
    strict = asked.model_copy(update={"pass_threshold": 0.7})

    def rule(how: str, *statuses: str, request: JudgeRequest = asked, **kw: object) -> str:
        found = aggregate(_votes(*statuses, **kw), request, how, pin)  # type: ignore[arg-type]
        return found.status if found.status != "skipped" else found.reason

    assert rule("majority", "pass", "pass", "fail") == "pass"
    assert rule("majority", "pass", "skipped", "fail") == JUDGE_SPLIT  # no majority of k
    assert rule("majority", "pass", "pass", "skipped") == "pass"  # two of three decide
    assert rule("unanimous", "pass", "pass", "fail") == "fail"
    assert rule("unanimous", "pass", "pass", "skipped") == "budget_blocked"  # never a pass
    assert rule("unanimous", "fail", "skipped", "skipped") == "fail"
    assert rule("mean", "pass", "fail", "fail", scores=(1.0, 0.3, 0.3)) == "pass"
    assert rule("mean", "pass", "fail", "fail", scores=(1.0, 0.3, 0.3), request=strict) == "fail"
    assert rule("mean", "pass", "skipped", "skipped") == "budget_blocked"  # a minority's mean
    assert rule("majority", "skipped", "skipped", "skipped") == "budget_blocked"

    def pair(how: str, *winners: str | None) -> str | None:
        verdicts = [
            PairVerdict(status="judged", winner=w, reason="judged")
            if w
            else PairVerdict.skipped("budget_blocked")
            for w in winners
        ]
        found = aggregate_pairs(verdicts, how, pin)  # type: ignore[arg-type]
        return found.winner if found.status == "judged" else found.reason

    assert pair("majority", "first", "first", "second") == "first"
    assert pair("majority", "first", "tie", "second") == JUDGE_SPLIT
    assert pair("unanimous", "first", "first", "second") == "tie"
    assert pair("unanimous", "first", "first", None) == "budget_blocked"
    assert pair("mean", "first", "tie", "second") == "tie"


def test_a_jury_file_is_checked_and_names_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"ASSAY_JUDGE_MODEL": "juror-a", "ASSAY_JUDGE_JURY": str(tmp_path / "none.yaml")}
    with pytest.raises(InputError, match="ASSAY_JUDGE_JURY: cannot read the jury file"):
        JudgeConfig.from_environ(env)
    clash = tmp_path / "clash.yaml"
    clash.write_text(yaml.safe_dump({"jurors": [{"model": "juror-a"}]}))
    with pytest.raises(InputError, match="ASSAY_JUDGE_JURY: the jury's model pins repeat"):
        JudgeConfig.from_environ(env | {"ASSAY_JUDGE_JURY": str(clash)})
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"aggregation": "plurality", "jurors": [{"model": "b"}]}))
    with pytest.raises(InputError, match="ASSAY_JUDGE_JURY"):
        JudgeConfig.from_environ(env | {"ASSAY_JUDGE_JURY": str(bad)})


def test_a_juror_without_its_key_leaves_the_jury_unable(
    jury_env: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUROR_C_KEY")
    setup = _jury()
    assert setup.make_judge is None and setup.skip_reason == "no credentials"


@pytest.mark.usefixtures("prefect_api")
def test_the_plan_counts_every_juror_exactly_cold_then_warm(
    jury_env: Callable[..., Path], judge_server: JudgeServer, store_dir: Path, tmp_path: Path
) -> None:
    suite, outputs = tmp_path / "suite.yaml", tmp_path / "outputs.jsonl"
    cases = [
        {
            "id": f"c{i}",
            "input": f"question {i}",
            "expected": f"answer{i}",
            "scorers": [{"llm_judge": {"rubric": "Gives the reference answer."}}],
        }
        for i in range(5)
    ]
    suite.write_text(yaml.safe_dump({"suite": "jury", "pass_threshold": 0.5, "cases": cases}))
    outputs.write_text(
        "".join(
            json.dumps({"case_id": f"c{i}", "output": f"It is answer{i}."}) + "\n" for i in range(5)
        )
    )
    options = {"suite": str(suite), "outputs": str(outputs), "subject": "agent:jury@v1"}

    def plan() -> tuple[int, int, int]:
        run = RunOptions(**options, judge_repeats=2)
        found = plan_run(FileStore(store_dir), run, judge_setup(None, False, 2))
        return found.jurors, found.calls, found.cache_hits

    assert plan() == (3, 3 * 2 * 5, 0)
    first = suite_run(**options, judge_repeats=2)
    assert first.metrics.judge_calls == 30 == len(judge_server.requests)
    assert first.judge is not None and first.judge.model == "jury:majority[juror-a+juror-b+juror-c]"
    assert first.metrics.passed == 5
    assert plan() == (3, 0, 30)
    assert suite_run(**options, judge_repeats=2).metrics.judge_calls == 0


def test_the_jury_is_admitted_as_a_whole(
    jury_env: Callable[..., Path], judge_server: JudgeServer, tmp_path: Path
) -> None:
    """One juror that follows injected instructions is outvoted under `majority`; two are not.
    Under `unanimous` one honest juror's fail refuses every canary, so two steered jurors of
    three still leave the jury admitted (its agreement then shows the split)."""
    store = FileStore(tmp_path / "evidence")
    calibration = str(_calibration_set(tmp_path))
    battery = load_battery()

    def admitted(steered: set[str], aggregation: str, fresh: bool) -> tuple[bool, list[str]]:
        judge_server.script(
            default=_by_model(
                {n: grades_by_reference(obeys_injections=n in steered) for n in JURORS}
            )
        )
        jury_env(aggregation)
        record = admit(
            store,
            _jury(fresh=fresh),
            battery,
            AdmissionAsk(
                admission_id=f"jury-{aggregation}-{len(steered)}", calibration_set=calibration
            ),
        )
        assert record.fingerprint.judge.model == f"jury:{aggregation}[juror-a+juror-b+juror-c]"
        assert record.jury is not None and record.jury.jurors == 3
        assert f"jury of 3 ({aggregation})" in summary(record)
        # Every juror passes the correct answers (plain and padded) and fails the wrong ones;
        # only the steered pass the canaries.
        answers = 2 * len(battery.cases)
        rows = [
            [1.0] * answers + [0.0] * answers + [float(name in steered)] * len(battery.canaries)
            for name in JURORS
        ]
        reference = krippendorff.alpha(reliability_data=rows, level_of_measurement="nominal")
        assert record.jury.alpha_verdicts == pytest.approx(reference, abs=1e-6)
        assert record.jury.items == 2 * answers + len(battery.canaries)
        return record.admitted, record.failed

    assert admitted({"juror-a"}, "majority", fresh=False) == (True, [])
    assert admitted({"juror-a", "juror-b"}, "majority", fresh=True) == (False, ["canaries"])
    assert admitted({"juror-a", "juror-b"}, "unanimous", fresh=True) == (True, [])
