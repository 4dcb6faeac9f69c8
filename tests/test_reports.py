"""Reports rendered by headless Chromium: the demo's v2-against-v1 run page (charts drawn, one
row per case, no console error, no network reference, no output text), a 5-run trend, a
calibration page, the report the flows write and link, `GET /runs/{id}/report`, and the table
and size of a 10,000-case report.

Set `ASSAY_SCREENSHOTS=docs/img` to refresh the screenshots of docs/reports.md.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from uuid import UUID

import pytest
from typer.testing import CliRunner

from assay.calibration.labels import CalibrationItem
from assay.calibration.report import Targets, measure, record_report
from assay.cli import app
from assay.judge.port import JudgePin, Verdict
from assay.reports import report_key
from assay.reports.run import run_page
from assay.reports.run_view import MAX_CASE_ROWS, load_view
from assay.runs.options import GateOptions
from assay.runs.records import load_result
from assay.runs.trials import TrialFigures
from assay.store import FileStore
from flows.gate import gate as gate_flow
from tasks.verdicts import verdict_result
from tests.api_service import start_service
from tests.browser import Rendered, print_pdf, render, require_chromium, screenshot
from tests.judge_server import JudgeServer, verdict
from tests.launched import suite_run

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
CANARY = "CANARYREPORTQZXW"
"""Letters only, so a numeric check reads the same number with or without it."""
SCREENSHOT_BYTES = 300_000
RESOURCE = re.compile(r"""(?:src|href|action)\s*=\s*["']?\s*https?://|url\(\s*["']?https?://""")
CHART = re.compile(r"<svg\b[^>]*\bclass=\"chart\"")

pytestmark = pytest.mark.usefixtures("prefect_api")


def _cli(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def _planted(tmp_path: Path, version: str) -> str:
    """The example outputs of `version` with the canary in every output text."""
    lines = (EXAMPLES / "outputs" / f"support-bot-{version}.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    for record in records:
        if isinstance(record.get("output"), str):
            record["output"] += f" {CANARY}"
    path = tmp_path / f"support-bot-{version}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def _keep_screenshot(
    page: Path, name: str, tmp_path: Path, height: int = 1600, only: str = ""
) -> None:
    """Screenshot `page` (only its section `#only`, when given), check it is small enough for
    the docs, keep it where asked."""
    from PIL import Image

    if only:
        alone = tmp_path / f"only-{only}.html"
        hide = f"body > :not(#{only}) {{ display: none; }}</style>"
        alone.write_text(page.read_text().replace("</style>", hide, 1))
        page = alone
    shot = tmp_path / name
    screenshot(page, shot, height=height)
    Image.open(shot).convert("RGB").quantize(colors=64).save(shot, optimize=True)
    assert shot.stat().st_size < SCREENSHOT_BYTES
    if folder := os.environ.get("ASSAY_SCREENSHOTS"):
        shutil.copy(shot, Path(folder) / name)


def _record_calibration(
    store: FileStore, report_id: str, pin: JudgePin, humans: list[str], judged: list[str]
) -> None:
    """A calibration report of `pin` measured on items people labelled `humans` and the judge
    `judged` (the items' output text is the canary: a report shows none of it)."""
    at = datetime(2026, 1, 1, tzinfo=UTC)
    items = [
        CalibrationItem(
            item_id=f"i{n}",
            input="q",
            output=f"a {CANARY}",
            rubric="r",
            label=label,
            labeler="me",
            labeled_at=at,
        )
        for n, label in enumerate(humans)
    ]
    verdicts = [
        Verdict(
            status=v,
            score=float(v == "pass"),
            reason="judged",
            model=pin.model,
            prompt_version=pin.prompt_version,
        )
        for v in judged
    ]
    report = measure(
        items,
        verdicts,
        report_id=report_id,
        targets=Targets(),
        judge=pin,
        calibration_set="set.jsonl",
        now=at,
    )
    record_report(store, report)


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def _demo_runs(root: Path, planted: bool) -> tuple[Path, str, str]:
    """The demo's runs, v1 then v2 against it (outputs planted with the canary, or as they
    are): (store folder, v1 run id, v2 run id)."""
    store = root / "store"
    runs: list[str] = []
    for version in ("v1", "v2"):
        outputs = (
            _planted(root, version)
            if planted
            else str(EXAMPLES / "outputs" / f"support-bot-{version}.jsonl")
        )
        result = suite_run(
            suite=str(EXAMPLES / "support-suite.yaml"),
            outputs=outputs,
            subject=f"agent:support-bot@{version}",
            store=f"file://{store}",
            baseline=runs[0] if runs else None,
        )
        runs.append(result.run_id)
    return store, runs[0], runs[1]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The demo's runs as `assay demo` makes them."""
    return _demo_runs(tmp_path_factory.mktemp("demo"), planted=False)


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """The demo's runs with the canary in every output text (verdicts change: exact checks)."""
    return _demo_runs(tmp_path_factory.mktemp("planted"), planted=True)


def test_console_errors_are_seen(tmp_path: Path) -> None:
    """The check below can fail: a page whose script throws shows up in `console`."""
    require_chromium()
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>notDefined();</script></body></html>")
    assert any("notDefined" in line for line in render(page).console)


def _report(store: Path, run: str, against: str, page: Path) -> Rendered:
    _cli("report", run, "--against", against, "-o", str(page), "--store", f"file://{store}")
    return render(page)


def test_demo_report_renders_in_chromium(demo: tuple[Path, str, str], tmp_path: Path) -> None:
    require_chromium()
    store, v1, v2 = demo
    page = tmp_path / "report.html"
    rendered = _report(store, v2, v1, page)
    assert RESOURCE.search(page.read_text()) is None
    assert rendered.console == []
    assert len(CHART.findall(rendered.dom)) >= 4
    rows = re.findall(r'<tr data-case-id="([^"]+)"', rendered.dom)
    assert len(rows) == len(set(rows)) == 50
    assert 'aria-label="flip table"' in rendered.dom
    assert "McNemar" in rendered.dom and "Newcombe" in rendered.dom
    assert "Regressed" in rendered.dom
    recorded = load_result(FileStore(store), v2).regression
    assert recorded is not None and recorded.score_drop is not None
    assert f"score drop {recorded.score_drop:+.3f}" in rendered.dom  # --against: the same
    failing = re.findall(r'<tr data-case-id="[^"]+" data-s="fail"', rendered.dom)
    filtered = render(page, "status=fail&tag=returns")
    visible = [
        row for row in re.findall(r"<tr data-case-id=[^>]*>", filtered.dom) if "hidden" not in row
    ]
    assert 0 < len(visible) < len(failing)
    assert all('data-s="fail"' in row for row in visible)
    assert filtered.console == []
    printed = tmp_path / "report.pdf"
    print_pdf(page, printed)
    pdf = printed.read_bytes()
    assert pdf.startswith(b"%PDF") and len(re.findall(rb"/Type\s*/Page\b(?!s)", pdf)) >= 3
    _keep_screenshot(page, "report-run.png", tmp_path, height=3000)


def test_no_output_text_in_a_report(planted: tuple[Path, str, str], tmp_path: Path) -> None:
    require_chromium()
    store, v1, v2 = planted
    page = tmp_path / "report.html"
    rendered = _report(store, v2, v1, page)
    assert len(re.findall(r'<tr data-case-id="', rendered.dom)) == 50
    assert CANARY not in page.read_text()
    assert CANARY not in rendered.dom
    assert _files_containing(store, CANARY.encode()) == []  # the stored reports included


def test_flows_write_the_report_once_and_link_it(demo: tuple[Path, str, str]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    store, _, v2 = demo
    evidence = FileStore(store)
    stored = evidence.get(report_key(v2)).decode()
    assert len(re.findall(r'<tr data-case-id="', stored)) == 50
    assert "Regressed" in stored
    assert evidence.put_once_if_absent(report_key(v2), b"other") is False  # write-once
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(v2)]))
        )
    links = [a for a in artifacts if "Report:" in str(a.data)]
    assert links, [a.type for a in artifacts]
    assert f"file://{store}/reports/{v2}.html" in str(links[0].data)


def test_trend_of_five_runs(tmp_path: Path, store_dir: Path) -> None:
    require_chromium()
    suite = {
        "suite": "trendy",
        "regression_threshold": 0.05,
        "cases": [{"id": f"c{i:02d}", "input": "q", "scorers": ["json_valid"]} for i in range(30)],
    }
    suite_file = tmp_path / "trendy.json"
    suite_file.write_text(json.dumps(suite))
    failing = [2, 3, 2, 16, 4]  # the 4th run drops from 28/30 to 14/30: regressed
    runs = []
    for number, fails in enumerate(failing):
        outputs = tmp_path / f"out{number}.jsonl"
        outputs.write_text(
            "".join(
                json.dumps({"case_id": f"c{i:02d}", "output": "oops" if i < fails else "{}"}) + "\n"
                for i in range(30)
            )
        )
        runs.append(suite_run(suite=str(suite_file), outputs=str(outputs), subject="agent:bot"))
    regressed = [r.regression is not None and r.regression.status == "regressed" for r in runs]
    assert regressed == [False, False, False, True, False]
    page = tmp_path / "trend.html"
    _cli("report", "--trend", "trendy", "--last", "5", "-o", str(page))
    rendered = render(page)
    assert rendered.console == []
    points = re.search(r'<g id="trend-points-0">(.*?)</g>\s*</g>', rendered.dom, re.S)
    assert points is not None
    assert len(re.findall(r"<use ", points.group(1))) == 5
    band = re.search(r'<g id="trend-band-0">\s*<defs>\s*<path id="\w+" d="([^"]+)"', rendered.dom)
    assert band is not None and band.group(1).count("L") >= 10  # 5 upper + 5 lower corners
    assert rendered.dom.count("regressed") >= 2  # the point's label and the runs table
    _keep_screenshot(page, "report-trend.png", tmp_path, height=1100)


def test_calibration_page_shows_the_confusion_matrix(tmp_path: Path, store_dir: Path) -> None:
    require_chromium()
    pin = JudgePin(model="m-1", prompt_version="p@1")
    humans = ["pass"] * 24 + ["fail"] * 16
    judge = ["pass"] * 21 + ["fail"] * 3 + ["pass"] * 4 + ["fail"] * 12
    _record_calibration(FileStore(store_dir), "cal-1", pin, humans, judge)
    page = tmp_path / "calibration.html"
    _cli("report", "--calibration", "cal-1", "-o", str(page))
    rendered = render(page)
    assert rendered.console == []
    cells = dict(re.findall(r'data-cell="(\w+)">(\d+)<', rendered.dom))
    assert cells == {"tp": "21", "fn": "3", "fp": "4", "tn": "12"}
    assert len(CHART.findall(rendered.dom)) == 1
    assert CANARY not in rendered.dom
    _keep_screenshot(page, "report-calibration.png", tmp_path, height=700)


def test_calibration_page_of_perfect_agreement_has_kappa_without_interval(
    tmp_path: Path, store_dir: Path
) -> None:
    """Perfect agreement: kappa is 1 and its standard error 0, so the report records no interval
    (the page crashed with a TypeError on it, found by the docs-command test)."""
    labels = ["pass"] * 5 + ["fail"] * 5
    _record_calibration(
        FileStore(store_dir), "cal-p", JudgePin(model="m", prompt_version="p"), labels, labels
    )
    page = tmp_path / "perfect.html"
    _cli("report", "--calibration", "cal-p", "-o", str(page))
    assert "1.000 (no interval)" in page.read_text()


def test_report_of_10000_cases_lists_the_failures_first_and_stays_small(
    tmp_path: Path, store_dir: Path
) -> None:
    """The table of a large run holds every failing case, then passing ones up to
    `MAX_CASE_ROWS`; the charts still count every case."""
    cases = 10_000
    suite = {
        "suite": "big",
        "cases": [
            {
                "id": f"case-{i:05d}",
                "input": "q",
                "query_class": f"class-{i % 7}",
                "tags": [f"tag-{i % 11}", f"area-{i % 5}"],
                "scorers": ["json_valid", {"contains": "a"}, {"regex": "b+"}],
            }
            for i in range(cases)
        ],
    }
    suite_file = tmp_path / "big.json"
    suite_file.write_text(json.dumps(suite))
    outputs = tmp_path / "big.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": f"case-{i:05d}", "output": '{"a": "b"}' if i % 9 else "x"})
            + "\n"
            for i in range(cases)
        )
    )
    result = suite_run(suite=str(suite_file), outputs=str(outputs), subject="agent:big")
    report = FileStore(store_dir).get(report_key(result.run_id)).decode()
    listed = re.findall(r'<tr data-case-id="([^"]+)" data-s="(\w+)"', report)
    failing = {f"case-{i:05d}" for i in range(cases) if not i % 9}
    assert len(listed) == MAX_CASE_ROWS
    assert failing <= {case_id for case_id, status in listed if status == "fail"}
    assert [case_id for case_id, _ in listed] == sorted(case_id for case_id, _ in listed)
    assert f"Cases (2,000 of {cases:,})" in report
    assert f"assay runs cases {result.run_id}" in report
    # tag-0 holds cases 0, 11, 22, …: 910 of them; the multiples of 99 (102) fail
    assert "808/910" in report
    assert len(report) < 1_500_000, len(report)


def test_service_serves_the_report_to_a_viewer_only(
    demo: tuple[Path, str, str], prefect_api: str
) -> None:
    store, _, v2 = demo
    service = start_service(store.parent, prefect_api_url=prefect_api)
    try:
        with service.client("viewer") as client:
            served = client.get(f"/runs/{v2}/report")
            unknown = client.get("/runs/no-such-run/report")
            spec = client.get("/openapi.json").json()
        with service.client() as anonymous:
            refused = anonymous.get(f"/runs/{v2}/report")
    finally:
        service.stop()
    assert served.status_code == 200, served.text[:300]
    assert served.headers["content-type"].startswith("text/html")
    assert served.headers["x-content-type-options"] == "nosniff"
    policy = served.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'sha256-" in policy
    assert served.text == FileStore(store).get(report_key(v2)).decode()
    assert refused.status_code == 401
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert unknown.status_code == 404
    documented = spec["paths"]["/runs/{run_id}/report"]["get"]["responses"]
    assert "text/html" in documented["200"]["content"] and "401" in documented


def test_trials_and_detectable_drop_render(demo: tuple[Path, str, str], tmp_path: Path) -> None:
    require_chromium()
    store, _, v2 = demo
    view = load_view(FileStore(store), v2)
    assert view.comparison is not None
    trials = {
        "cases": 50,
        "trials": 150,
        "k_min": 3,
        "k_max": 3,
        "pass_rate": {"rate": 0.7, "se": 0.05, "lo": 0.6, "hi": 0.8, "method": "cluster-robust"},
        "pass_at_k": {"1": 0.7, "2": 0.8, "3": 0.85},
        "pass_pow_k": {"1": 0.7, "2": 0.6, "3": 0.55},
        "flaky_cases": 2,
        "flaky": ["window-40-days", "return-window-days"],
    }
    drop = view.comparison.minimum_detectable_drop
    assert drop is not None  # every comparison reports it
    before = run_page(view)
    assert "pass@k" not in before
    assert "Minimum detectable drop" in before and f"{drop:.3f}" in before
    later = replace(
        view,
        result=view.result.model_copy(update={"trials": TrialFigures.model_validate(trials)}),
    )
    page = tmp_path / "later.html"
    page.write_text(run_page(later))
    rendered = render(page)
    assert rendered.console == []
    assert 'aria-label="pass@k and pass^k"' in rendered.dom
    assert "2 flaky case(s)" in rendered.dom


def test_judge_section_with_calibration_flip_rate_and_spend(
    judge_env: JudgeServer, store_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judged run (3 repeats; the judge's reasoning carries the canary) with a calibration
    report for its very judge: status, confusion matrix, naive rate, flip rate and spend."""
    require_chromium()
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", "1.0")  # USD per million tokens
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", "2.0")
    judge_env.script(default=verdict("pass", 0.9, reasoning=f"because {CANARY}"))
    result = suite_run(
        suite=str(EXAMPLES / "support-suite.yaml"),
        outputs=_planted(tmp_path, "v2"),
        subject="agent:support-bot@v2",
        judge_repeats=3,
    )
    assert result.judge is not None and result.metrics.judged_checks > 0
    labels = ["pass"] * 20 + ["fail"] * 12
    judged = ["pass"] * 19 + ["fail"] + ["pass"] * 2 + ["fail"] * 10
    _record_calibration(FileStore(store_dir), "cal-j", result.judge, labels, judged)
    page = tmp_path / "judged.html"
    _cli("report", result.run_id, "-o", str(page))
    rendered = render(page)
    assert rendered.console == []
    assert 'id="judge"' in rendered.dom and "calibrated" in rendered.dom
    cells = dict(re.findall(r'data-cell="(\w+)">(\d+)<', rendered.dom))
    assert cells == {"tp": "19", "fn": "1", "fp": "2", "tn": "10"}
    for chart in (
        "Judged checks: naive and corrected pass rate",
        "Judge flip rate over 3 repeats",
        "Judge spend",
    ):
        assert f'aria-label="{chart}"' in rendered.dom
    assert "$0.0043" in rendered.dom  # 24 calls × (120 × $1 + 30 × $2) per million tokens
    assert CANARY not in rendered.dom
    assert _files_containing(store_dir, CANARY.encode()) == []
    _keep_screenshot(page, "report-judge.png", tmp_path, height=1100, only="judge")


def test_the_gate_links_its_run_report(demo: tuple[Path, str, str]) -> None:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    store, v1, _ = demo
    options = GateOptions(
        suite=str(EXAMPLES / "support-suite.yaml"),
        outputs=str(EXAMPLES / "outputs" / "support-bot-v2.jsonl"),
        subject="agent:support-bot@v2",
        store=f"file://{store}",
        baseline=v1,
    )
    state = gate_flow(options, return_state=True)
    gated = verdict_result(state)
    run_id = gated.result.run_id
    page = FileStore(store).get(report_key(run_id)).decode()
    # Written once, by the gate after it decided: the page shows the decision and its rules.
    assert gated.decision.verdict == "fail"
    assert '<section id="gate"><h2>Gate: fail</h2>' in page
    assert all(rule.rule in page for rule in gated.decision.rules)
    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[state.state_details.flow_run_id])
            )
        )
    links = [str(a.data) for a in artifacts if "Report:" in str(a.data)]
    assert links and f"reports/{run_id}.html" in links[0]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((), "give exactly one of RUN_ID, --trend SUITE or --calibration REPORT_ID"),
        (("abcd", "--trend", "s"), "give exactly one of"),
        (("--trend", "s", "--against", "x"), "--against needs a RUN_ID"),
        (("no-such-run",), "no run no-such-run"),
        (("--calibration", "nope"), "no calibration report nope"),
    ],
)
def test_bad_report_arguments_exit_2_with_one_line(
    store_dir: Path, tmp_path: Path, args: tuple[str, ...], says: str
) -> None:
    result = CliRunner().invoke(app, ["report", *args, "-o", str(tmp_path / "x.html")])
    assert result.exit_code == 2, result.output
    assert says in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "x.html").exists()


def _loaded_after(imports: str) -> list[str]:
    probe = (
        f"import sys, {imports}; "
        "print(*sorted(m for m in sys.modules if m.startswith(('matplotlib', 'assay.reports'))))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-300:]
    return done.stdout.split()


def test_no_chart_library_is_loaded_until_a_chart_is_drawn() -> None:
    """`assay --help` and every command stay as fast as before (matplotlib costs ~0.6 s): the
    CLI loads no report module, the flows and the service load the page code but not
    matplotlib."""
    assert _loaded_after("assay.cli") == []
    assert not any(m.startswith("matplotlib") for m in _loaded_after("flows.gate, assay.api.app"))


def test_a_report_served_under_its_content_security_policy_still_runs_its_script(
    demo: tuple[Path, str, str],
) -> None:
    """The policy allows the page's one script by hash: served with it, the case table's
    filter still counts the cases (a wrong hash would block the script)."""
    import http.server
    import threading

    from assay.reports.page import CONTENT_SECURITY_POLICY
    from tests.browser import render
    from tests.servers import free_port

    require_chromium()
    store, _, v2 = demo
    page = FileStore(store).get(report_key(v2))

    class Served(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Served)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        shown = render(f"http://127.0.0.1:{server.server_address[1]}/report.html")
    finally:
        server.shutdown()
    assert "cases shown" in shown.dom
    assert not [line for line in shown.console if "Content Security Policy" in line]
