"""Multiplicity: each regression test's p, Holm p and BH q, held to statsmodels and published
values, on a real nightly and on simulated nights with no real change."""

from __future__ import annotations

import gc
import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    ArtifactFilterKey,
)
from scipy.stats import binomtest, norm  # type: ignore[import-untyped]
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.proportion import confint_proportions_2indep

from assay.corrected_difference import CorrectedDifference
from assay.error_bars import Z95
from assay.findings import list_findings
from assay.multiplicity import (
    ALPHA,
    DropTest,
    Family,
    Scope,
    adjust,
    newcombe_drop_p,
    suite_test,
    wald_drop_p,
)
from assay.pairwise.compare import compare_outputs
from assay.pairwise.render import markdown_report
from assay.regression import RegressionStatus, RunSide, compare
from assay.store import FileStore
from assay.suites import registry
from assay.suites.suite import load_suite
from flows.nightly import NightlyJob, NightlyOptions, nightly
from tests.conftest import EXAMPLES
from tests.judge_server import JudgeServer, prefers
from tests.launched import suite_run
from tests.test_pairwise import MARK_A, MARK_B, _setup

COUNTS = [
    ((45, 50), (38, 50)),
    ((90, 100), (80, 100)),
    ((10, 12), (4, 12)),
    ((300, 400), (270, 410)),
    ((19, 20), (20, 20)),  # no drop: p is 1
    ((7, 7), (0, 9)),
    ((1000, 1000), (985, 1000)),
    ((500, 1000), (400, 1000)),
]


@pytest.mark.parametrize(("baseline", "candidate"), COUNTS)
def test_newcombe_p_is_the_alpha_at_which_statsmodels_interval_touches_zero(
    baseline: tuple[int, int], candidate: tuple[int, int]
) -> None:
    p = newcombe_drop_p(baseline, candidate)
    (bp, bn), (cp, cn) = baseline, candidate

    def lower(alpha: float) -> float:
        return float(
            confint_proportions_2indep(
                bp, bn, cp, cn, method="newcomb", compare="diff", alpha=alpha
            )[0]
        )

    if bp / bn <= cp / cn:
        assert p == 1.0
        return
    assert abs(lower(p)) < 1e-9
    assert lower(p * (1 - 1e-6)) < 0 < lower(min(p * (1 + 1e-6), 1.0))


@pytest.mark.parametrize(("baseline", "candidate"), COUNTS)
def test_the_raw_p_is_at_most_alpha_exactly_when_the_run_regressed(
    baseline: tuple[int, int], candidate: tuple[int, int]
) -> None:
    """A threshold of 0 leaves the interval alone to decide `regressed`."""
    comparison = compare(_side("base", baseline), _side("cand", candidate), threshold=0.0)
    test = suite_test("s@1 · agent:a", "cand", comparison)

    assert test is not None
    assert (test.raw_p <= ALPHA) == (comparison.status is RegressionStatus.REGRESSED)
    assert test.regressed == (comparison.status is RegressionStatus.REGRESSED)


def _side(run: str, counts: tuple[int, int]) -> RunSide:
    passed, scored = counts
    return RunSide(
        run_id=run,
        passed=passed,
        scored=scored,
        score=passed / scored,
        suite_version=1,
        scorers=frozenset(),
    )


@pytest.mark.parametrize(("estimate", "se"), [(0.08, 0.03), (0.08, 0.05), (0.3, 0.2), (0.9, 0.2)])
def test_a_judge_corrected_comparison_is_tested_on_its_own_normal_interval(
    estimate: float, se: float
) -> None:
    comparison = compare(_side("base", (40, 50)), _side("cand", (40, 50)), threshold=0.0)
    comparison.judge_corrected = CorrectedDifference.model_validate(
        {
            "estimate": estimate,
            "interval": [max(-1.0, estimate - Z95 * se), min(1.0, estimate + Z95 * se)],
            "judge_diff": 0.0,
            "judge_interval": [-0.1, 0.1],
            "labelled": 30,
            "unlabelled": 20,
            "lambda": 0.5,
        }
    )
    test = suite_test("s@1 · agent:a", "cand", comparison)

    assert test is not None and test.method.startswith("judge-corrected")
    assert abs(test.raw_p - 2 * float(norm.sf(estimate / se))) < 1e-12
    assert (test.raw_p <= ALPHA) == (estimate - Z95 * se > 0)


def test_wald_p_is_the_normal_two_sided_p_of_a_drop() -> None:
    for mean, se in [(0.05, 0.02), (0.2, 0.05), (0.01, 0.1)]:
        assert abs(wald_drop_p(mean, se) - 2 * float(norm.sf(mean / se))) < 1e-15
    assert wald_drop_p(-0.1, 0.02) == 1.0


def _family(p_values: list[float], decided_by: str) -> Family:
    tests = [
        DropTest(
            id=f"t{i}",
            scope=Scope.SUITE,
            run_id=f"r{i}",
            baseline_run="b",
            baseline=(1, 1),
            candidate=(0, 1),
            method="given",
            raw_p=p,
            regressed=p <= ALPHA,
        )
        for i, p in enumerate(p_values)
    ]
    return Family(name="published", decided_by=decided_by, tests=tests)


BH_1995 = [0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459]
BH_1995 += [0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000]
"""The 15 p-values of Benjamini & Hochberg (1995), section 4: their procedure rejects the four
smallest at 0.05; Holm's step-down, the three smallest."""


def test_adjust_reproduces_benjamini_hochberg_1995() -> None:
    by_holm, by_bh = adjust(_family(BH_1995, "holm")), adjust(_family(BH_1995, "fdr_bh"))

    assert [t.id for t in by_holm.surviving] == ["t0", "t1", "t2"]
    assert [t.id for t in by_bh.surviving] == ["t0", "t1", "t2", "t3"]
    assert by_holm.unadjusted == 9


def test_twenty_nights_without_a_change_keep_the_family_wise_rate_at_five_percent() -> None:
    """Each night 12 suites of 60 cases are judged twice with identical outputs: every case
    passes each time with its own probability, so any drop is noise. Unadjusted, some night
    shows a `regressed`; after Holm, at most 5% of nights do."""
    # statsmodels' Holm calls gc.collect(), which rescans this session's whole heap (0.7 s a
    # call here): what lives now is moved out of its reach, as `assay.gcpause.kept_long` does.
    gc.freeze()
    rng = random.Random(20261205)
    nights, suites, cases = 20, 12, 60
    false_nights_raw = false_nights_holm = 0
    for night in range(nights):
        tests = []
        for suite in range(suites):
            chances = [rng.betavariate(4, 1) for _ in range(cases)]
            before = sum(rng.random() < c for c in chances)
            after = sum(rng.random() < c for c in chances)
            p = newcombe_drop_p((before, cases), (after, cases))
            tests.append((f"n{night}s{suite}", p))
        family = _family([p for _, p in tests], "holm")
        false_nights_raw += family.unadjusted > 0
        false_nights_holm += len(adjust(family).surviving) > 0
    assert false_nights_holm / nights <= 0.05
    assert false_nights_raw > false_nights_holm


# A real nightly over three suites, each compared with an earlier run of its subject.

SUITES = {
    "support": ("support-suite.yaml", "support-bot"),
    "agent": ("agent-suite.yaml", "agent"),
    "conversation": ("conversation-suite.yaml", "conversation"),
}
ROW = re.compile(
    r"^\| (?P<id>[^|]+?) \| \d+/\d+ \| \d+/\d+ \| (?P<raw>[^ |]+) \| (?P<holm>[^ |]+) "
    r"\| (?P<bh>[^ |]+) \|",
    re.MULTILINE,
)


def _suite_file(tmp_path: Path, name: str, primary: bool) -> str:
    file, _ = SUITES[name]
    text = (EXAMPLES / file).read_text()
    if primary:
        text = text.replace("\ncases:", "\nprimary_comparison: true\ncases:", 1)
    target = tmp_path / file
    target.write_text(text)
    return str(target)


def _artifact(flow_run_id: object) -> str:
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                key=ArtifactFilterKey(any_=["assay-nightly"]),
                flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]),
            )
        )
    return str(artifacts[0].data)


def _printed(section: str) -> tuple[int, list[tuple[str, float, float, float]], list[str]]:
    found = re.search(r"\w+: (\d+) test\(s\) adjusted together", section)
    assert found is not None
    declared = int(found[1])
    rows, primary = [], []
    for match in ROW.finditer(section):
        if match["id"].endswith("(primary)"):
            primary.append(match["id"])
            continue
        rows.append((match["id"], float(match["raw"]), float(match["holm"]), float(match["bh"])))
    return declared, rows, primary


@pytest.mark.usefixtures("prefect_api")
def test_a_nightly_prints_every_test_with_figures_equal_to_statsmodels(
    store_dir: Path, tmp_path: Path
) -> None:
    suites = {name: _suite_file(tmp_path, name, primary=name == "agent") for name in SUITES}
    for name, (_, stem) in SUITES.items():
        suite_run(
            suite=suites[name],
            subject=f"agent:{stem}",
            outputs=str(EXAMPLES / "outputs" / f"{stem}-v1.jsonl"),
        )
    jobs = [
        NightlyJob(
            suite=suites[name],
            subject=f"agent:{stem}",
            outputs=str(EXAMPLES / "outputs" / f"{stem}-v2.jsonl"),
        )
        for name, (_, stem) in SUITES.items()
    ]

    state = nightly(NightlyOptions(jobs=jobs), return_state=True)

    text = _artifact(state.state_details.flow_run_id)
    regressions, slices = text.split("### regressions")[1].split("### slices")
    declared, rows, primary = _printed(regressions)
    assert declared == len(rows) == 2
    assert [p.split(" · ")[0] for p in primary] == ["refund-agent@1"]
    assert "Pre-registered primary comparison(s), left out" in regressions
    declared_slices, slice_rows, _ = _printed(slices)
    assert declared_slices == len(slice_rows) > 10
    kinds = {row[0].split(" · ")[-1].split(":")[0] for row in slice_rows}
    assert kinds == {"tag", "check", "turn"}
    for found in (rows, slice_rows):
        raw = [row[1] for row in found]
        holm = multipletests(raw, method="holm")[1]
        bh = multipletests(raw, method="fdr_bh")[1]
        for (_, _, holm_printed, bh_printed), h, q in zip(found, holm, bh, strict=True):
            assert abs(holm_printed - h) < 1e-9
            assert abs(bh_printed - q) < 1e-9

    # The support bot regressed; its finding carries the figures the artifact printed.
    # (Rows come in the order the jobs finished: name the suite whole, `support-` is two.)
    support = next(row for row in rows if row[0].startswith("support-bot@"))
    findings = [f for f in list_findings(FileStore(store_dir)) if f.adjusted is not None]
    regressions_found = {
        f.adjusted.test: f for f in findings if f.kind == "family_regression" and f.adjusted
    }
    regression = regressions_found[support[0]]
    assert regression.adjusted is not None
    assert abs(regression.adjusted.holm_p - support[2]) < 1e-9
    assert regression.adjusted.family_size == 2
    assert all(
        f.adjusted is not None and f.adjusted.bh_q <= ALPHA
        for f in findings
        if f.kind == "slice_regression"
    )


def test_a_pairwise_comparison_tests_each_tag_and_adjusts_them_together(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    """B's outputs carry the marker the judge prefers on the product-info cases only."""
    store = FileStore(tmp_path / "store")
    suite = load_suite(EXAMPLES / "support-suite.yaml")
    version, _ = registry.publish(store, suite)
    tagged = {case.id for case in suite.cases if "product-info" in case.tags}
    rows = [
        json.loads(line)
        for line in (EXAMPLES / "outputs" / "support-bot-v1.jsonl").read_text().splitlines()
    ]
    paths = []
    for side, marked in (("a", lambda case: case not in tagged), ("b", tagged.__contains__)):
        path = tmp_path / f"{side}.jsonl"
        path.write_text(
            "".join(
                json.dumps(
                    {
                        **row,
                        "output": row["output"] + (MARK_A if marked(row["case_id"]) else MARK_B),
                    }
                )
                + "\n"
                for row in rows
            )
        )
        paths.append(str(path))
    judge_server.script(default=prefers(MARK_A))

    report = compare_outputs(
        store, version, suite, paths[0], paths[1], _setup(judge_server), comparison_id="cmp-slices"
    )

    family = report.slices
    assert family is not None and family.decided_by == "fdr_bh"
    by_tag = {test.id.split("tag:")[1]: test for test in family.tests}
    assert by_tag["product-info"].baseline == (0, 3) and by_tag["product-info"].candidate == (3, 3)
    assert by_tag["returns"].baseline == (2, 2)
    for test in family.tests:
        (wins_a, _), (wins_b, _) = test.baseline, test.candidate
        assert abs(test.raw_p - binomtest(wins_a, wins_a + wins_b).pvalue) < 1e-12
    raw = [test.raw_p for test in family.tests]
    for test, h, q in zip(
        family.tests,
        multipletests(raw, method="holm")[1],
        multipletests(raw, method="fdr_bh")[1],
        strict=True,
    ):
        assert test.holm_p is not None and abs(test.holm_p - h) < 1e-9
        assert test.bh_q is not None and abs(test.bh_q - q) < 1e-9
    text = markdown_report(report)
    assert f"slices: {family.size} test(s) adjusted together" in text
    assert "| A wins | B wins |" in text


def test_the_run_path_does_not_import_statsmodels() -> None:
    """Only `adjust` imports statsmodels: a suite run, which never adjusts, does not pay for it."""
    code = (
        "import sys, assay.multiplicity, assay.runs.multiplicity, assay.runs.findings, "
        "assay.runs.pipeline, assay.pairwise.report; print('statsmodels' in sys.modules)"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert ran.stdout.strip() == "False", ran.stderr
