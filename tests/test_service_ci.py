"""`assay serve` as CI drives it (issue 24): asynchronous runs followed live over SSE, per-case
results, the OpenAPI contract and its offline docs, and store faults answered as problems.

`assay serve` runs as a real process on the session's Prefect API, limited to one run at a time
with one queued, so admission is visible; every call goes over loopback with httpx.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import connect_sse
from openapi_spec_validator import validate

from tests.api_service import Service, example_outputs, example_suite, start_service
from tests.servers import RestartableS3Server, free_port

PREFER_ASYNC = {"Prefer": "respond-async"}
PROBLEM = "application/problem+json"
LARGE = 30_000


def _large_suite() -> dict[str, Any]:
    cases = [
        {"id": f"c{i:05d}", "input": "q", "scorers": [{"contains": "yes"}]} for i in range(LARGE)
    ]
    return {"suite": "large", "pass_threshold": 0.5, "cases": cases}


def _large_outputs() -> list[dict[str, str]]:
    """Every third case answers "no": 10,000 failures, 20,000 passes."""
    return [{"case_id": f"c{i:05d}", "output": "no" if i % 3 == 0 else "yes"} for i in range(LARGE)]


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Iterator[Service]:
    """One run at a time, one queued; `outputs_uri` reads go to an S3 endpoint that is down."""
    env = {
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{free_port()}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "ASSAY_S3_DEADLINE_SECONDS": "2",
    }
    running = start_service(
        tmp_path_factory.mktemp("serve-ci"),
        "--max-concurrent-runs",
        "1",
        "--max-queued-runs",
        "1",
        env=env,
        prefect_api_url=prefect_api,
    )
    with running.client("operator") as client:
        for document in (example_suite(), _large_suite()):
            published = client.post("/suites", json=document)
            assert published.status_code == 201, published.text
    try:
        yield running
    finally:
        running.stop()


def _small(version: str = "v2", subject: str = "agent:support-bot") -> dict[str, Any]:
    return {
        "suite": "support-bot",
        "subject": f"{subject}@{version}",
        "outputs": example_outputs(version),
    }


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["status"] == status and "Traceback" not in body["detail"]
    return body


def _wait_completed(client: httpx.Client, run_id: str, timeout: float = 300) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = client.get(f"/runs/{run_id}")
        if response.status_code == 200:
            result: dict[str, Any] = response.json()
            return result
        assert response.status_code == 202, response.text
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not complete")


def test_a_30000_case_async_run_is_accepted_at_once_and_followed_live(service: Service) -> None:
    body = {"suite": "large", "subject": "agent:large@v1", "outputs": _large_outputs()}
    with service.client("operator") as client:
        client.post("/runs", json=_small("v1", "agent:warm-up"))  # the flow code is loaded
        started = time.perf_counter()
        accepted = client.post("/runs", json=body, headers=PREFER_ASYNC)
        accepted_in = time.perf_counter() - started
        assert accepted.status_code == 202, accepted.text
        state = accepted.json()
        run_id = state["run_id"]
        assert accepted.headers["location"] == f"/runs/{run_id}"
        assert accepted.headers["preference-applied"] == "respond-async"
        assert state["status"] in ("queued", "running") and state["chunks_done"] == 0
        # Admission holds for async runs: one running, one queued, the next refused.
        queued = client.post("/runs", json=_small("v1", "agent:queued"), headers=PREFER_ASYNC)
        refused = client.post("/runs", json=_small("v1", "agent:refused"), headers=PREFER_ASYNC)
        queued_state = client.get(f"/runs/{queued.json()['run_id']}")
    assert queued.status_code == 202 and queued.json()["status"] == "queued", queued.text
    assert queued_state.status_code == 202 and queued_state.json()["status"] == "queued"
    assert int(_problem(refused, 429)["status"]) == 429 and int(refused.headers["retry-after"]) >= 1

    with service.client("viewer") as viewer:
        # A client that leaves after a few frames costs the run nothing (checked below).
        with connect_sse(viewer, "GET", f"/runs/{run_id}/events") as source:
            for seen, _ in enumerate(source.iter_sse()):
                if seen == 3:
                    break
        events = []
        while_running: httpx.Response | None = None
        with connect_sse(viewer, "GET", f"/runs/{run_id}/events") as source:
            for event in source.iter_sse():
                if event.event == "case" and while_running is None:
                    while_running = viewer.get(f"/runs/{run_id}")
                events.append(event)
        ended = time.perf_counter()
        with connect_sse(
            viewer, "GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": "14999"}
        ) as source:
            resumed = list(source.iter_sse())
        queued_result = _wait_completed(viewer, queued.json()["run_id"])

    assert while_running is not None and while_running.status_code == 202
    assert while_running.json()["status"] == "running"
    cases = [event for event in events if event.event == "case"]
    progress = [event.json() for event in events if event.event == "progress"]
    assert [event.id for event in cases] == [str(i) for i in range(LARGE)]
    case_ids = [event.json()["case_id"] for event in cases]
    assert sorted(case_ids) == [f"c{i:05d}" for i in range(LARGE)], "every case exactly once"
    assert all(set(event.json()) == {"case_id", "status", "score", "label"} for event in cases)
    assert progress[-1]["chunks_done"] == progress[-1]["chunks"] == 15
    assert [p["chunks_done"] for p in progress] == sorted(p["chunks_done"] for p in progress)
    summary = events[-1]
    assert summary.event == "summary" and events.index(summary) == len(events) - 1
    result = summary.json()
    assert result["metrics"]["cases"] == LARGE
    assert (result["metrics"]["passed"], result["metrics"]["failed"]) == (20_000, 10_000)
    assert sum(event.json()["status"] == "pass" for event in cases) == 20_000
    assert [event.id for event in resumed[:-1]] == [str(i) for i in range(15_000, LARGE)]
    assert [event.data for event in resumed[:-1]] == [event.data for event in cases[15_000:]]
    assert resumed[-1].event == "summary"
    assert queued_result["metrics"]["cases"] == 50
    ran_for = ended - started
    print(f"202 after {accepted_in:.3f} s; the summary came {ran_for:.1f} s after the request")
    assert accepted_in < 1.0 and accepted_in < ran_for / 5, f"accepted after {accepted_in:.2f} s"


def test_an_async_request_is_checked_before_202_and_a_bad_output_fails_the_run(
    service: Service,
) -> None:
    bad_line = _small("v1", "agent:bad-line")
    bad_line["outputs"][2] = {"case_id": "no-such-case", "output": "x"}
    with service.client("operator") as client:
        no_suite = client.post("/runs", json={**_small(), "suite": "nope"}, headers=PREFER_ASYNC)
        no_baseline = client.post(
            "/gate", json={**_small(), "baseline": "no-such-run"}, headers=PREFER_ASYNC
        )
        bad_subject = client.post(
            "/runs", json={**_small(), "subject": "no-kind"}, headers=PREFER_ASYNC
        )
        accepted = client.post("/runs", json=bad_line, headers=PREFER_ASYNC)
        assert accepted.status_code == 202, accepted.text
        run_id = accepted.json()["run_id"]
        deadline = time.monotonic() + 120
        while (shown := client.get(f"/runs/{run_id}")).status_code == 202:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        with connect_sse(client, "GET", f"/runs/{run_id}/events") as source:
            refused = source.response
    _problem(no_suite, 404)
    _problem(no_baseline, 404)
    _problem(bad_subject, 422)
    failed = _problem(shown, 409)
    assert failed["run_status"] == "failed"
    assert "outputs line 3" in failed["detail"] and "no-such-case" in failed["detail"]
    assert refused.status_code == 409


def test_an_async_run_with_an_idempotency_key_is_accepted_once(service: Service) -> None:
    headers = {**PREFER_ASYNC, "Idempotency-Key": "ci-build-77"}
    with service.client("operator") as client:
        first = client.post("/gate", json=_small("v2", "agent:idem"), headers=headers)
        again = client.post("/gate", json=_small("v2", "agent:idem"), headers=headers)
        other = client.post("/gate", json=_small("v1", "agent:idem"), headers=headers)
        result = _wait_completed(client, first.json()["run_id"])
        gate = client.get(f"/gates/{result['run_id']}")
    assert first.status_code == again.status_code == 202
    assert again.json()["run_id"] == first.json()["run_id"]
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    _problem(other, 409)
    assert gate.status_code == 200 and gate.json()["recorded"] == "fail"


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-X", "importtime", "-m", "assay.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def _imported(stderr: str) -> set[str]:
    """Top-level packages `python -X importtime` says were imported."""
    return {
        match.group(1).split(".")[0]
        for match in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", stderr, re.M)
    }


def test_runs_cases_lists_the_same_records_as_the_cli_page_by_page(service: Service) -> None:
    with service.client("operator") as client:
        run_id = client.post("/runs", json=_small("v2", "agent:cases")).json()["run_id"]
        pages: list[dict[str, Any]] = []
        cursor = None
        while True:
            params: dict[str, Any] = {"status": "failed", "limit": 4}
            if cursor is not None:
                params["cursor"] = cursor
            page = client.get(f"/runs/{run_id}/cases", params=params).json()
            pages.append(page)
            cursor = page["next_cursor"]
            if cursor is None:
                break
        everything = client.get(f"/runs/{run_id}/cases", params={"limit": 500}).json()
        bad_cursor = client.get(f"/runs/{run_id}/cases", params={"cursor": "%%%"})
        bad_status = client.get(f"/runs/{run_id}/cases", params={"status": "meh"})
    store = f"file://{service.store_dir}"
    cli = _cli("runs", "cases", run_id, "--status", "failed", "--json", "--store", store)
    assert cli.returncode == 0, cli.stderr
    listed = [item for page in pages for item in page["items"]]
    assert listed == json.loads(cli.stdout)
    assert len(listed) == 14 and all(len(page["items"]) <= 4 for page in pages)
    assert {item["status"] for item in listed} <= {"fail", "error"}
    assert len(everything["items"]) == 50 and everything["next_cursor"] is None
    assert set(listed[0]) == {"case_id", "status", "score", "label", "checks"}
    assert set(listed[0]["checks"][0]) == {"scorer", "kind", "status", "score", "label"}
    _problem(bad_cursor, 422)
    _problem(bad_status, 422)


def test_the_openapi_contract_validates_and_declares_bearer_auth_examples_and_headers(
    service: Service,
) -> None:
    with service.client() as client:
        document = client.get("/openapi.json").json()
        pages = {page: client.get(page) for page in ("/docs", "/redoc")}
        assets = {
            src: client.get(src)
            for page in pages.values()
            for src in re.findall(r'(?:src|href)="([^"]+)"', page.text)
        }
    validate(document)
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http",
        "scheme": "bearer",
        "description": document["components"]["securitySchemes"]["bearer"]["description"],
    }
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            expected = None if path in ("/healthz", "/livez") else [{"bearer": []}]
            assert operation.get("security") == expected, (method, path)
    paths = document["paths"]
    for path in ("/runs/{run_id}/cases", "/runs/{run_id}/events", "/v1/traces", "/gate"):
        assert path in paths
    suite_body = paths["/suites"]["post"]["requestBody"]["content"]["application/json"]
    assert suite_body["schema"] == {"$ref": "#/components/schemas/Suite"}
    assert "cases" in document["components"]["schemas"]["Suite"]["properties"]
    assert suite_body["example"]["cases"]
    run = paths["/runs"]["post"]
    assert run["requestBody"]["content"]["application/json"]["example"]["subject"]
    assert "Location" in run["responses"]["202"]["headers"]
    assert "Idempotent-Replayed" in run["responses"]["201"]["headers"]
    assert "Retry-After" in run["responses"]["429"]["headers"]
    assert run["responses"]["429"]["content"]["application/problem+json"]["example"]
    assert "Prefer" in {p["name"] for p in run["parameters"]}
    traces = paths["/v1/traces"]["post"]
    assert set(traces["requestBody"]["content"]) == {"application/x-protobuf", "application/json"}
    assert {"200", "400", "401", "413", "415", "503"} <= set(traces["responses"])
    cases = paths["/runs/{run_id}/cases"]["get"]["responses"]["200"]["content"]
    assert cases["application/json"]["example"]["items"]
    for page in pages.values():
        assert page.status_code == 200
        assert re.search(r"https?://", page.text) is None, "no external URL in the page"
    assert assets and all(response.status_code == 200 for response in assets.values())
    assert any(src.endswith("swagger-ui-bundle.js") for src in assets)
    assert any(src.endswith("redoc.standalone.js") for src in assets)


def test_a_store_fault_in_outputs_uri_is_503_naming_the_endpoint(service: Service) -> None:
    body = {"suite": "support-bot", "subject": "agent:s3", "outputs_uri": "s3://drop/part/"}
    with service.client("operator") as client:
        for headers in ({}, PREFER_ASYNC):
            response = client.post("/runs", json=body, headers=headers)
            problem = _problem(response, 503)
            endpoint = problem["detail"].split(" at ")[1].split(" ")[0]
            assert (
                endpoint.startswith("http://127.0.0.1:") and "s3://drop/part" in problem["detail"]
            )
            assert "check that the endpoint is up" in problem["detail"]
            assert int(response.headers["retry-after"]) >= 1
        unknown = client.get("/runs/no-such-run")
    assert str(service.store_dir) not in _problem(unknown, 404)["detail"]


@pytest.mark.parametrize("fault", ["endpoint down", "missing bucket"])
def test_an_s3_store_fault_is_503_on_every_route_never_500(
    fault: str, tmp_path: Path, prefect_api: str, restartable_moto: RestartableS3Server
) -> None:
    store = restartable_moto.store()
    bucket = store.bucket if fault == "endpoint down" else "assay-no-such-bucket-24"
    env = {
        "AWS_ENDPOINT_URL": restartable_moto.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "ASSAY_S3_DEADLINE_SECONDS": "2",
    }
    service = start_service(
        tmp_path,
        "--store",
        f"s3://{bucket}/assay",
        env=env,
        prefect_api_url=prefect_api,
        store=store,
    )
    if fault == "endpoint down":
        restartable_moto.stop()
    try:
        with service.client("operator") as client:
            health = client.get("/healthz")
            answers = [
                client.request(method, path, json=body) for method, path, _, body in ROUTES_TO_PROBE
            ]
    finally:
        service.stop()
    assert health.status_code == 503 and health.json()["store"] is False
    for response in answers:
        problem = _problem(response, 503)
        if fault == "endpoint down":
            assert restartable_moto.endpoint_url in problem["detail"], problem["detail"]
            assert int(response.headers["retry-after"]) >= 1
        else:
            assert (
                bucket in problem["detail"]
                and "create it or fix the s3:// URI" in problem["detail"]
            )
            assert "retry-after" not in response.headers  # only the configuration can fix it


ROUTES_TO_PROBE: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("GET", "/suites", "viewer", None),
    ("POST", "/suites", "operator", {"suite": "s", "cases": [{"id": "c", "input": "i"}]}),
    ("GET", "/runs", "viewer", None),
    ("GET", "/runs/some-run", "viewer", None),
    ("GET", "/runs/some-run/events", "viewer", None),
    ("GET", "/runs/some-run/cases", "viewer", None),
    ("POST", "/runs", "operator", {"suite": "s", "subject": "agent:x", "outputs": []}),
    ("POST", "/gate", "operator", {"suite": "s", "subject": "agent:x", "outputs": []}),
    ("GET", "/gates/some-run", "viewer", None),
    ("GET", "/baselines?suite=s&subject=agent:x", "viewer", None),
    ("GET", "/scorecards", "viewer", None),
    ("GET", "/findings", "viewer", None),
    ("POST", "/overrides", "admin", {"run_id": "some-run", "reason": "x" * 30}),
]


CLIENT_SCRIPT = """
import json, sys
from assay.client import AssayAPIError, AssayClient

prefect_at_import = sorted(m for m in sys.modules if m.split(".")[0] == "prefect")
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
client = AssayClient()
waited = client.run("support-bot", outputs=rows, subject="agent:client@v2")
accepted = client.run("support-bot", outputs=rows, subject="agent:client@v2", wait=False)
events = list(client.events(accepted.run_id))
resumed = list(client.events(accepted.run_id, last_event_id="44"))
failed = client.cases(accepted.run_id, status="failed")
try:
    client.run("no-such-suite", outputs=rows, subject="agent:client@v2")
except AssayAPIError as error:
    unknown = {"status": error.status, "problem": error.problem}
print(json.dumps({
    "prefect_at_import": prefect_at_import,
    "prefect_at_end": sorted(m for m in sys.modules if m.split(".")[0] == "prefect"),
    "waited": waited.model_dump(mode="json"),
    "accepted": accepted.model_dump(mode="json"),
    "events": events,
    "resumed": [event["id"] for event in resumed],
    "failed": [case.model_dump(mode="json") for case in failed],
    "unknown": unknown,
}))
"""


def test_the_python_client_runs_follows_and_lists_cases_without_prefect(
    service: Service, tmp_path: Path
) -> None:
    script = tmp_path / "client.py"
    script.write_text(CLIENT_SCRIPT)
    outputs = Path(__file__).resolve().parent.parent / "examples/outputs/support-bot-v2.jsonl"
    env = {
        "PATH": "/usr/bin:/bin",
        "ASSAY_URL": service.url,
        "ASSAY_TOKEN": service.tokens["operator"],
        "NO_PROXY": "127.0.0.1",
    }
    done = subprocess.run(
        [sys.executable, str(script), str(outputs)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["prefect_at_import"] == [] and seen["prefect_at_end"] == []
    assert seen["waited"]["metrics"]["cases"] == 50 and seen["waited"]["run_id"]
    assert seen["accepted"]["status"] in ("queued", "running")
    events = seen["events"]
    cases = [event for event in events if event["event"] == "case"]
    assert [event["id"] for event in cases] == [str(i) for i in range(50)]
    assert events[-1]["event"] == "summary"
    summary = events[-1]["data"]
    assert summary["run_id"] == seen["accepted"]["run_id"]
    assert summary["metrics"]["passed"] == seen["waited"]["metrics"]["passed"]
    assert seen["resumed"] == ["45", "46", "47", "48", "49", None]
    failed_ids = {event["data"]["case_id"] for event in cases if event["data"]["status"] == "fail"}
    assert {case["case_id"] for case in seen["failed"]} >= failed_ids
    assert seen["unknown"]["status"] == 404
    assert seen["unknown"]["problem"]["type"].endswith("/not-found")


def test_the_cli_is_a_client_of_the_service_with_assay_url(
    service: Service, tmp_path: Path
) -> None:
    env = {
        **{k: v for k, v in __import__("os").environ.items() if not k.startswith("PREFECT_")},
        "ASSAY_URL": service.url,
        "ASSAY_TOKEN": service.tokens["operator"],
        "ASSAY_STORE": f"file://{tmp_path}/never-used",
        "NO_PROXY": "127.0.0.1",
    }
    examples = Path(__file__).resolve().parent.parent / "examples"
    suite = str(examples / "support-suite.yaml")
    v2 = str(examples / "outputs/support-bot-v2.jsonl")
    ran = _cli("run", suite, "--outputs", v2, "--subject", "agent:cli@v2", "--json", env=env)
    assert ran.returncode == 0, ran.stderr
    assert "prefect" not in _imported(ran.stderr), "a client run imports no Prefect"
    result = json.loads(ran.stdout)
    run_id = result["run_id"]
    gated = _cli("gate", "support-bot", "--outputs", v2, "--subject", "agent:cli@v2", env=env)
    shown = _cli("runs", "show", run_id, "--json", env=env)
    cases = _cli("runs", "cases", run_id, "--status", "failed", "--json", env=env)
    listed = _cli("runs", "list", "--json", env=env)
    refused = _cli("run", suite, "--outputs", v2, "--workers", "2", env=env)
    missing = _cli("runs", "show", "no-such-run", env=env)
    local = {k: v for k, v in env.items() if k != "ASSAY_URL"}
    served = _cli("runs", "list", "--json", "--server", service.url, env=local)
    with service.client("viewer") as client:
        route_cases = client.get(f"/runs/{run_id}/cases", params={"status": "failed"}).json()
    assert not (tmp_path / "never-used").exists(), "the CLI never opened a store of its own"
    assert (result["metrics"]["passed"], result["metrics"]["cases"]) == (36, 50)
    assert gated.returncode == 1, gated.stderr
    assert "GATE FAILED" in gated.stdout and "pass_rate" in gated.stdout
    assert json.loads(shown.stdout) == result
    assert json.loads(cases.stdout) == route_cases["items"]
    assert run_id in {run["run_id"] for run in json.loads(listed.stdout)}
    assert json.loads(served.stdout) == json.loads(listed.stdout)
    assert refused.returncode == 2
    assert "--workers is not available when calling a service" in refused.stderr.splitlines()[-1]
    assert missing.returncode == 2 and "HTTP 404" in missing.stderr.splitlines()[-1]


def test_a_suite_file_is_read_as_a_local_run_reads_it_before_anything_is_sent(
    service: Service, tmp_path: Path
) -> None:
    """Through the service, a suite file with a duplicate key or an alias bomb is refused in one
    line naming the file and line, as a local run refuses it (it was parsed by a plain YAML load:
    the duplicate silently kept its last value, and the bomb was expanded into the request)."""
    env = {
        **{k: v for k, v in __import__("os").environ.items() if not k.startswith("PREFECT_")},
        "ASSAY_URL": service.url,
        "ASSAY_TOKEN": service.tokens["operator"],
        "NO_PROXY": "127.0.0.1",
    }
    examples = Path(__file__).resolve().parent.parent / "examples"
    text = (examples / "support-suite.yaml").read_text()
    duplicated = tmp_path / "duplicated.yaml"
    duplicated.write_text(text.replace("suite: support-bot\n", "suite: support-bot\nsuite: x\n", 1))
    bomb = tmp_path / "bomb.yaml"
    levels = [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 12)]
    bomb.write_text("\n".join(['l0: &l0 ["lol"]', *levels, "suite: bomb", "cases: *l11", ""]))
    v2 = str(examples / "outputs/support-bot-v2.jsonl")
    for path, line in ((duplicated, 11), (bomb, None)):
        ran = _cli("run", str(path), "--outputs", v2, "--subject", "agent:x", env=env)
        assert ran.returncode == 2, ran.stderr[-2000:]
        last = ran.stderr.strip().splitlines()[-1]
        assert str(path) in last, last
        if line is not None:
            assert f"line {line}" in last and "duplicate key" in last, last
