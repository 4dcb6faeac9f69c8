"""Every run option reaches every edge, or the edge says why not (`assay.runs.edges`).

The edges are read as a user meets them — the flags `assay run --help` and `assay gate --help`
list, the OpenAPI schema of `POST /runs` and `POST /gate`, the body `AssayClient` sends, the
fields of a nightly job — so an edge that stops exposing an option without listing it as
refused fails here. A boolean option added to a copy of the code appears at every edge with no
other file edited. No bound of a run option is written outside its model.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from assay.api.app import create_app
from assay.api.settings import ServeSettings
from assay.cli import app
from assay.client import AssayAPIError, AssayClient
from assay.runs.edges import COMMAND_LINE, NIGHTLY_JOB, SERVICE, Exposure
from assay.runs.options import GateOptions, RunOptions
from flows.nightly import NightlyJob

ROOT = Path(__file__).resolve().parent.parent
SOURCE_PACKAGES = ("assay", "flows", "tasks", "blocks")


def _flags(command: str) -> set[str]:
    """The flags `assay COMMAND --help` lists, as field names."""
    done = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"})
    assert done.exit_code == 0, done.output
    return {flag[2:].replace("-", "_") for flag in re.findall(r"--[a-z][a-z-]*", done.output)}


def _request_fields(store_dir: Path, path: str) -> set[str]:
    """The fields of a route's JSON body in the service's OpenAPI schema."""
    service = create_app(ServeSettings(store=f"file://{store_dir}", start_prefect=False))
    schema = service.openapi()
    reference = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    name = reference["schema"]["$ref"].rsplit("/", 1)[1]
    return set(schema["components"]["schemas"][name]["properties"])


def _client_body(**options: Any) -> dict[str, Any]:
    """The body `AssayClient.run` sends with `options` (answered by a transport that records
    it and refuses the run: the body is what is checked, not a run)."""
    sent: list[dict[str, Any]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(422, json={"title": "recorded", "detail": "recorded"})

    client = AssayClient("http://127.0.0.1:9", token="t", transport=httpx.MockTransport(answer))
    with pytest.raises(AssayAPIError, match="recorded"):
        client.run("s@1", subject="agent:a", outputs_uri="s3://b/p", wait=False, **options)
    return sent[0]


def _unexposed(exposure: Exposure, model: type[RunOptions], shown: set[str]) -> set[str]:
    return set(model.model_fields) - shown - set(exposure.own) - set(exposure.refused)


def test_every_option_reaches_every_edge_or_is_refused_with_a_reason(store_dir: Path) -> None:
    assert _unexposed(COMMAND_LINE, RunOptions, _flags("run")) == set()
    assert _unexposed(COMMAND_LINE, GateOptions, _flags("gate")) == set()
    assert _unexposed(SERVICE, RunOptions, _request_fields(store_dir, "/runs")) == set()
    assert _unexposed(SERVICE, GateOptions, _request_fields(store_dir, "/gate")) == set()
    assert _unexposed(NIGHTLY_JOB, RunOptions, set(NightlyJob.model_fields)) == set()
    for exposure in (COMMAND_LINE, SERVICE, NIGHTLY_JOB):
        assert all(reason.strip() for reason in exposure.refused.values()), exposure.edge
    # What the service refuses, its schema does not offer.
    assert set(SERVICE.refused) & _request_fields(store_dir, "/gate") == set()


def test_the_gate_s_own_limit_and_a_fresh_judge_reach_the_service(store_dir: Path) -> None:
    assert "max_judge_flip_rate" in _request_fields(store_dir, "/gate")
    assert "max_judge_flip_rate" not in _request_fields(store_dir, "/runs")
    body = _client_body(fresh_judge=True, judge_repeats=3)
    assert (body["fresh_judge"], body["judge_repeats"]) == (True, 3)


def test_a_nightly_job_s_options_are_the_run_s() -> None:
    job = NightlyJob(
        suite="s", subject="agent:a@v1", outputs="o.jsonl", baseline="run-7", judge_repeats=3
    )
    options = job.options("file:///tmp/store", None)
    assert (options.baseline, options.judge_repeats) == ("run-7", 3)
    assert options.outputs.location == "o.jsonl"


def _copy_of_the_code(tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    for package in SOURCE_PACKAGES:
        shutil.copytree(
            ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    return copy


PROBE = """
import json, re
from pathlib import Path
import httpx
from typer.testing import CliRunner
from assay.api.app import create_app
from assay.api.settings import ServeSettings
from assay.cli import app
from assay.client import AssayAPIError, AssayClient
from flows.nightly import NightlyJob

def flags(command):
    output = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "400"}).output
    return sorted(set(re.findall(r"--[a-z][a-z-]*", output)))

service = create_app(ServeSettings(store="file://" + str(Path("store").resolve()),
                                   start_prefect=False)).openapi()["components"]["schemas"]
sent = []
def answer(request):
    sent.append(json.loads(request.content))
    return httpx.Response(422, json={"title": "x", "detail": "x"})
client = AssayClient("http://127.0.0.1:9", token="t", transport=httpx.MockTransport(answer))
try:
    client.gate("s@1", subject="agent:a", outputs_uri="s3://b/p", wait=False, shadow_mode=True)
except AssayAPIError:
    pass
print(json.dumps({
    "run": flags("run"), "gate": flags("gate"),
    "runs_body": sorted(service["RunRequest"]["properties"]),
    "gate_body": sorted(service["GateRequest"]["properties"]),
    "client": sent[0], "nightly": sorted(NightlyJob.model_fields),
}))
"""


def test_a_new_option_appears_at_every_edge_with_no_other_file_edited(tmp_path: Path) -> None:
    copy = _copy_of_the_code(tmp_path)
    options = copy / "assay" / "runs" / "options.py"
    declared = "    resume: bool = Field(\n"
    text = options.read_text(encoding="utf-8")
    assert declared in text
    added = '    shadow_mode: bool = Field(default=False, description="Score, record nothing.")\n'
    options.write_text(text.replace(declared, added + declared), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(copy), "ASSAY_STORE": f"file://{tmp_path}/store"}
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert "--shadow-mode" in seen["run"] and "--shadow-mode" in seen["gate"]
    assert "shadow_mode" in seen["runs_body"] and "shadow_mode" in seen["gate_body"]
    assert seen["client"]["shadow_mode"] is True
    assert "shadow_mode" in seen["nightly"]


BOUND_KEYWORDS = frozenset({"ge", "gt", "le", "lt", "min", "max"})


def _bounded_options() -> set[str]:
    return {
        name
        for name, info in GateOptions.model_fields.items()
        if any(
            getattr(meta, key, None) is not None for meta in info.metadata for key in BOUND_KEYWORDS
        )
    }


def _bounds_written_again(path: Path, names: set[str]) -> list[str]:
    """Where `path` bounds a run option again: a field of that name with a literal bound, or a
    comparison of that name with a number."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            call = node.value
            if node.target.id in names and isinstance(call, ast.Call):
                literal = [
                    k.arg
                    for k in call.keywords
                    if k.arg in BOUND_KEYWORDS and isinstance(k.value, ast.Constant)
                ]
                if literal:
                    found.append(f"{path}:{node.lineno} {node.target.id} {literal}")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = {s.id if isinstance(s, ast.Name) else getattr(s, "attr", None) for s in sides}
            numbers = [
                s for s in sides if isinstance(s, ast.Constant) and type(s.value) in (int, float)
            ]
            if named & names and numbers:
                found.append(f"{path}:{node.lineno} compares {sorted(named & names)}")
    return found


def test_no_bound_of_a_run_option_is_written_outside_its_model() -> None:
    names = _bounded_options()
    assert {"sample", "chunk_size", "judge_repeats", "workers", "max_judge_flip_rate"} <= names
    model = {ROOT / "assay" / "runs" / "options.py", ROOT / "assay" / "choices.py"}
    written = [
        place
        for package in SOURCE_PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if path not in model
        for place in _bounds_written_again(path, names)
    ]
    assert written == []
