"""Ids, the service and report links (issue 39, items 4 and 5): `runs list` shows 8-character
ids and each run's verdict; every command that takes a run id takes a unique prefix, through the
service too; `assay findings` reads the service when one is up; the Prefect report link of a run
the service ran opens the report there, and otherwise is an absolute `file://` URI; the empty
store says which store it is; the gate's rule lines read as verdicts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from uuid import UUID

import httpx
import pytest
from typer.testing import CliRunner

from assay.cli import app, local_service
from assay.cli.gate import RULE_VERDICTS
from assay.cli.runs import short_ids
from assay.gate.decision import RULES
from assay.reports import REPORTS_URL_ENV
from tasks.reports import report_link
from tests.conftest import EXAMPLES

# The lasting local service on its own PREFECT_HOME and store (a fixture, imported to be used).
from tests.test_local_service import local as local

SUITE = str(EXAMPLES / "support-suite.yaml")
MODULES = "modules at exit:"
RUN = (
    "import atexit, runpy, sys\n"
    f"atexit.register(lambda: print({MODULES!r}, *sys.modules, file=sys.stderr))\n"
    "sys.argv[0] = 'assay'\n"
    "runpy.run_module('assay.cli', run_name='__main__')\n"
)


def test_the_empty_store_names_itself_as_an_absolute_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASSAY_URL", raising=False)
    listed = CliRunner().invoke(app, ["runs", "list", "--store", "file://rel-store", "--local"])
    assert listed.exit_code == 0, listed.output
    assert listed.output.strip() == f"No runs recorded yet in file://{tmp_path}/rel-store."


def test_short_ids_grow_past_8_characters_only_where_two_runs_share_them() -> None:
    ids = ["0a1b2c3d-1111", "0a1b2c3d-2222", "ffee0011-3333"]
    assert short_ids(ids) == {
        "0a1b2c3d-1111": "0a1b2c3d-1",
        "0a1b2c3d-2222": "0a1b2c3d-2",
        "ffee0011-3333": "ffee0011-3",
    }
    assert short_ids(["0a1b2c3d-1111", "ffee0011-3333"])["ffee0011-3333"] == "ffee0011"


def test_every_gate_rule_reads_as_a_verdict() -> None:
    assert set(RULE_VERDICTS) == set(RULES)


def test_the_report_link_is_absolute_or_the_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ASSAY_URL", raising=False)
    monkeypatch.delenv(REPORTS_URL_ENV, raising=False)
    expected = (tmp_path / "a store" / "reports" / "r1.html").as_uri()
    assert report_link("file://a store", "r1") == expected  # not file://a store/…: relative
    assert report_link("s3://bucket/evidence", "r1") == "s3://bucket/evidence/reports/r1.html"
    monkeypatch.setenv("ASSAY_URL", "https://assay.example/")
    assert report_link("file://a store", "r1") == "https://assay.example/runs/r1/report"
    monkeypatch.setenv(REPORTS_URL_ENV, "http://127.0.0.1:9")
    assert report_link("file://a store", "r1") == "http://127.0.0.1:9/runs/r1/report"


def _assay(*args: str, env: dict[str, str]) -> tuple[str, set[str]]:
    ran = subprocess.run(
        [sys.executable, "-c", RUN, *args], capture_output=True, text=True, env=env, timeout=300
    )
    others, _, modules = ran.stderr.rpartition(MODULES)
    assert ran.returncode == 0, others + ran.stdout
    return ran.stdout, set(modules.split())


def _report_links(run_id: str) -> list[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[UUID(run_id)]))
        )
    return [str(a.data) for a in artifacts if "Report:" in str(a.data)]


def test_prefixes_findings_and_report_links_through_the_local_service(
    local: tuple[local_service.LocalService, dict[str, str]],
) -> None:
    service, env = local
    outputs = EXAMPLES / "outputs"
    v1 = json.loads(
        _assay("run", SUITE, "--outputs", str(outputs / "support-bot-v1.jsonl"), "--json", env=env)[
            0
        ]
    )["run_id"]
    ran, modules = _assay(
        "run", SUITE, "--outputs", str(outputs / "support-bot-v2.jsonl"),
        "--baseline", v1[:8], "--json", env=env,
    )  # fmt: skip
    assert "prefect" not in modules
    v2 = json.loads(ran)["run_id"]

    listed, _ = _assay("runs", "list", env=env)
    cells = [re.split(r"\s*[│┃|]\s*", line.strip(" │┃|")) for line in listed.splitlines()]
    rows = {row[0]: row for row in cells if len(row) > 3 and row[0] != "run"}
    assert set(rows) == {v1[:8], v2[:8]}
    assert rows[v2[:8]][3] == "regressed" and rows[v1[:8]][3] == "passed"
    assert v1 not in listed  # the whole ids no longer wrap the table

    shown, modules = _assay("runs", "show", v2[:8], "--json", env=env)
    assert json.loads(shown)["run_id"] == v2 and "prefect" not in modules
    cases, _ = _assay("runs", "cases", v2[:8], "--status", "failed", "--json", env=env)
    assert {case["status"] for case in json.loads(cases)} == {"fail"}

    served, modules = _assay("findings", "--json", env=env)
    assert "prefect" not in modules
    here, modules = _assay("findings", "--json", "--local", env=env)
    assert "prefect" not in modules and json.loads(served) == json.loads(here)
    assert ("eval_regression", v2) in {(f["kind"], f["run_id"]) for f in json.loads(served)}

    # The service ran v2's flow: its Prefect link opens the report there.
    (link,) = _report_links(v2)
    assert f"{service.url}/runs/{v2}/report" in link
    page = httpx.get(
        f"{service.url}/runs/{v2}/report",
        headers={"Authorization": f"Bearer {service.token}"},
        timeout=60,
        trust_env=False,
    )
    assert page.status_code == 200 and v2 in page.text
