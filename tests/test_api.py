"""The HTTP service end to end: `assay serve` as a real process, called over loopback with httpx.

One service (with its own ephemeral Prefect API, store, PREFECT_HOME and TMPDIR) serves the
module; a second one, pointed at the session's Prefect API and limited to one run at a time with
no queue, shows the configured API is used and that runs beyond the limit get 429. The canary
test stops the first service and searches everything it wrote, so it is the module's last test.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from httpx_sse import connect_sse

from assay.gate.overrides import audit_records
from assay.store import FileStore
from tests.api_service import Service, example_outputs, example_suite, start_service
from tests.servers import S3Server, free_port

CANARY = "CANARY-api-5c1d-never-stored"
PROBLEM = "application/problem+json"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, moto_s3: S3Server) -> Iterator[Service]:
    """The module's service, reading `outputs_uri` from the session's moto S3 server."""
    env = {
        "AWS_ENDPOINT_URL": moto_s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    running = start_service(tmp_path_factory.mktemp("serve"), "--max-body-mb", "1", env=env)
    with running.client("operator") as client:
        published = client.post("/suites", json=example_suite())
        assert published.status_code in (200, 201), published.text
    try:
        yield running
    finally:
        running.stop()


def _run(client: httpx.Client, version: str = "v2", **extra: Any) -> httpx.Response:
    body = {
        "suite": "support-bot",
        "subject": f"agent:support-bot@{version}",
        "outputs": example_outputs(version),
        **extra,
    }
    return client.post("/runs", json=body)


def _problem(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert {"type", "title", "detail"} <= body.keys()
    return body


def test_healthz_needs_no_token_and_says_store_and_prefect_answer(service: Service) -> None:
    with service.client() as client:
        response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "store": True, "prefect": True}


def test_openapi_and_docs_are_served(service: Service) -> None:
    with service.client() as client:
        spec = client.get("/openapi.json").json()
        docs = client.get("/docs")
    assert docs.status_code == 200
    for path in (
        "/healthz",
        "/livez",
        "/suites",
        "/suites/{name}",
        "/suites/{name}/versions/{version}",
        "/runs",
        "/runs/{run_id}",
        "/runs/{run_id}/events",
        "/baselines",
        "/gate",
        "/gate/what-if",
        "/gates/{run_id}",
        "/overrides",
        "/scorecards",
        "/findings",
    ):
        assert path in spec["paths"], path


def test_publish_is_201_for_a_new_version_and_200_for_identical_content(service: Service) -> None:
    document = example_suite()
    document["suite"] = "publish-check"
    with service.client("operator") as client:
        first = client.post("/suites", json=document)
        again = client.post("/suites", json=document)
        document["cases"] = document["cases"][:3]
        changed = client.post("/suites", json=document)
    assert first.status_code == 201 and first.json()["created"] is True
    assert again.status_code == 200 and again.json()["created"] is False
    assert again.json()["version"] == first.json()["version"] == 1
    assert changed.status_code == 201 and changed.json()["version"] == 2
    with service.client("viewer") as client:
        listed = {s["suite"]: s for s in client.get("/suites").json()}
        latest = client.get("/suites/publish-check").json()
        first_version = client.get("/suites/publish-check/versions/1").json()
        missing = client.get("/suites/publish-check/versions/9")
    assert listed["publish-check"]["version"] == 2
    assert latest["version"] == 2 and len(latest["document"]["cases"]) == 3
    assert first_version["cases"] == 50 and len(first_version["document"]["cases"]) == 50
    assert first_version["content_hash"] == first.json()["content_hash"]
    _problem(missing, 404)


def test_a_bad_suite_document_is_422_naming_line_and_field(service: Service) -> None:
    text = (
        '{\n  "suite": "bad-suite",\n  "cases": [\n'
        '    {"id": "a", "input": "q", "scorers": 3}\n  ]\n}'
    )
    with service.client("operator") as client:
        response = client.post(
            "/suites", content=text, headers={"content-type": "application/json"}
        )
        malformed = client.post(
            "/suites", content="{", headers={"content-type": "application/json"}
        )
    body = _problem(response, 422)
    assert body["detail"].startswith("body.json line 4, field cases[0].scorers:"), body
    assert "malformed JSON" in _problem(malformed, 422)["detail"]


def test_a_run_with_inline_outputs_returns_the_eval_result(service: Service) -> None:
    with service.client("operator") as client:
        response = _run(client)
    assert response.status_code == 201, response.text
    result = response.json()
    assert (result["suite"], result["suite_version"]) == ("support-bot", 1)
    assert (result["subject_kind"], result["subject_id"], result["variant"]) == (
        "agent",
        "support-bot",
        "v2",
    )
    assert result["metrics"]["cases"] == 50 and result["metrics"]["missing"] == 2
    assert result["pass_rate"] == pytest.approx(36 / 50)
    assert result["outputs"].startswith("inline://"), "a reference, never the outputs"
    with service.client("viewer") as client:
        assert client.get(f"/runs/{result['run_id']}").json() == result


def test_a_run_reads_outputs_uri_from_s3(service: Service, moto_s3: S3Server) -> None:
    bucket = moto_s3.create_bucket()
    lines = "\n".join(json.dumps(line) for line in example_outputs("v1"))
    moto_s3.client().put_object(Bucket=bucket, Key="drop/part-1.jsonl", Body=lines.encode())
    body = {
        "suite": "support-bot",
        "subject": "agent:s3-bot",
        "outputs_uri": f"s3://{bucket}/drop/",
    }
    with service.client("operator") as client:
        response = client.post("/runs", json=body)
    assert response.status_code == 201, response.text
    result = response.json()
    assert result["outputs"] == f"s3://{bucket}/drop/"
    assert result["metrics"]["cases"] == 50 and result["metrics"]["missing"] == 0


def test_a_bad_outputs_uri_is_a_422_before_any_flow_run(
    tmp_path: Path, moto_s3: S3Server, prefect_api: str
) -> None:
    """`outputs_uri` is validated in the service, as the CLI validates `--outputs`: a bad line
    is a 422 naming object and line, and no flow run is left failed in Prefect."""
    bucket = moto_s3.create_bucket()
    lines = [json.dumps(line) for line in example_outputs("v1")]
    lines[2] = '{"case_id": "refund-window", "output": '
    moto_s3.client().put_object(Bucket=bucket, Key="bad/part-1.jsonl", Body="\n".join(lines))
    env = {
        "AWS_ENDPOINT_URL": moto_s3.endpoint_url,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    running = start_service(tmp_path, env=env, prefect_api_url=prefect_api)
    try:
        with running.client("operator") as client:
            assert client.post("/suites", json=example_suite()).status_code == 201
            body = {
                "suite": "support-bot",
                "subject": "agent:bad-uri-bot@v1",
                "outputs_uri": f"s3://{bucket}/bad/",
            }
            problem = _problem(client.post("/runs", json=body), 422)
            gate = _problem(client.post("/gate", json=body), 422)
    finally:
        running.stop()
    for answer in (problem, gate):
        assert f"s3://{bucket}/bad/part-1.jsonl line 3: malformed JSON" in answer["detail"]
    tagged = {"flow_runs": {"tags": {"all_": ["subject:agent:bad-uri-bot@v1"]}}}
    with httpx.Client(trust_env=False) as prefect:
        flow_runs = prefect.post(f"{prefect_api}/flow_runs/filter", json=tagged).json()
    assert flow_runs == [], [run["name"] for run in flow_runs]


@pytest.mark.parametrize(
    "uri",
    ["s3://assay-no-such-bucket-7f3a/drop/", "s3://Not_A_Valid_Bucket/drop/"],
    ids=["missing bucket", "invalid bucket name"],
)
def test_an_outputs_uri_that_cannot_be_read_is_a_problem_not_a_500(
    service: Service, uri: str
) -> None:
    body = {"suite": "support-bot", "subject": "agent:s3-missing", "outputs_uri": uri}
    with service.client("operator") as client:
        response = client.post("/runs", json=body)
    assert response.status_code in (422, 503), response.text
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert uri.split("/")[2] in problem["detail"] and "Traceback" not in problem["detail"]


def test_stopping_the_service_stops_the_ephemeral_prefect_api_it_started(tmp_path: Path) -> None:
    """Without a configured Prefect API the service starts an ephemeral one; SIGTERM to the
    service (what a terminal's Ctrl-C or a supervisor sends) must not leave it running alone."""
    running = start_service(tmp_path)
    service = psutil.Process(running.process.pid)
    prefect = [
        child
        for child in service.children(recursive=True)
        if "prefect.server.api.server" in " ".join(child.cmdline())
    ]
    assert len(prefect) == 1, [child.cmdline() for child in service.children(recursive=True)]
    running.stop()
    _, alive = psutil.wait_procs(prefect, timeout=15)
    assert alive == [], f"the ephemeral Prefect API outlived the service: {alive}"


def test_runs_list_newest_first_with_cursor_pagination(service: Service) -> None:
    with service.client("operator") as client:
        ids = [
            _run(client, "v1", subject="agent:paged@v1").json()["run_id"],
            _run(client, "v1", subject="agent:paged@v1").json()["run_id"],
            _run(client, "v1", subject="agent:paged@v1").json()["run_id"],
        ]
    seen: list[str] = []
    cursor = None
    with service.client("viewer") as client:
        while True:
            params: dict[str, Any] = {"subject": "agent:paged", "limit": 2}
            if cursor:
                params["cursor"] = cursor
            page = client.get("/runs", params=params).json()
            assert set(page) == {"items", "next_cursor"}
            assert len(page["items"]) <= 2
            seen += [item["run_id"] for item in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        everything = client.get("/runs", params={"suite": "support-bot"}).json()["items"]
        none = client.get("/runs", params={"suite": "no-such-suite"}).json()
    assert seen == list(reversed(ids))
    assert set(ids) <= {item["run_id"] for item in everything}
    assert none == {"items": [], "next_cursor": None}


def test_a_case_list_cursor_is_bound_to_its_run_and_filter(service: Service) -> None:
    """A cursor from one run's (or one filter's) case list used on another skipped or repeated
    cases silently; now it is refused."""
    with service.client("operator") as client:
        first = _run(client, "v2", subject="agent:cursors@v2").json()["run_id"]
        second = _run(client, "v2", subject="agent:cursors@v2").json()["run_id"]
    with service.client("viewer") as client:
        page = client.get(f"/runs/{first}/cases", params={"limit": 5}).json()
        cursor = page["next_cursor"]
        assert cursor is not None
        again = client.get(f"/runs/{first}/cases", params={"limit": 5, "cursor": cursor})
        other_run = client.get(f"/runs/{second}/cases", params={"limit": 5, "cursor": cursor})
        other_filter = client.get(
            f"/runs/{first}/cases", params={"limit": 5, "cursor": cursor, "status": "failed"}
        )
    assert again.status_code == 200
    assert [c["case_id"] for c in again.json()["items"]] != [c["case_id"] for c in page["items"]]
    for refused in (other_run, other_filter):
        body = _problem(refused, 422)
        assert "another run or filter" in body["detail"]


def test_sse_replays_cases_then_the_summary_and_resumes_after_last_event_id(
    service: Service,
) -> None:
    with service.client("operator") as client:
        result = _run(client, "v1").json()
    run_id = result["run_id"]
    with service.client("viewer") as client:
        with connect_sse(client, "GET", f"/runs/{run_id}/events") as source:
            assert source.response.headers["content-type"].startswith("text/event-stream")
            events = list(source.iter_sse())
        with connect_sse(
            client, "GET", f"/runs/{run_id}/events", headers={"Last-Event-ID": "46"}
        ) as source:
            resumed = list(source.iter_sse())
    cases, summary = events[:-1], events[-1]
    assert [e.event for e in cases] == ["case"] * 50
    assert [e.id for e in cases] == [str(i) for i in range(50)]
    frame = cases[0].json()
    assert set(frame) == {"case_id", "status", "score", "label"}
    # Each case once; `id:` numbers them in the order their chunks finished.
    suite_ids = [case["id"] for case in example_suite()["cases"]]
    assert sorted(e.json()["case_id"] for e in cases) == sorted(suite_ids)
    assert sum(e.json()["status"] == "pass" for e in cases) == result["metrics"]["passed"]
    assert summary.event == "summary" and summary.json() == result
    assert [e.id for e in resumed[:-1]] == ["47", "48", "49"]
    assert [e.data for e in resumed[:-1]] == [e.data for e in cases[47:]]
    assert resumed[-1].event == "summary"


def test_baselines_pin_show_and_unpin(service: Service) -> None:
    with service.client("operator") as client:
        run_id = _run(client, "v1", subject="agent:pinned@v1").json()["run_id"]
        pinned = client.post("/baselines", json={"run_id": run_id})
        query = {"suite": "support-bot", "subject": "agent:pinned", "variant": "v1"}
        shown = client.get("/baselines", params=query).json()
        unpinned = client.delete("/baselines", params=query)
        after = client.get("/baselines", params=query).json()
        unknown_run = client.post("/baselines", json={"run_id": "no-such-run"})
        unknown_suite = client.get("/baselines", params={**query, "suite": "nope"})
    assert pinned.status_code == 201 and pinned.json()["run_id"] == run_id
    assert shown == {"suite": "support-bot", "subject": "agent:pinned@v1", "pinned": run_id}
    assert unpinned.status_code == 200 and unpinned.json()["action"] == "unpin"
    assert after["pinned"] is None
    _problem(unknown_run, 404)
    _problem(unknown_suite, 404)


def _gate(client: httpx.Client, version: str, subject: str, **options: Any) -> httpx.Response:
    body = {"suite": "support-bot", "subject": subject, "outputs": example_outputs(version)}
    return client.post("/gate", json={**body, **options})


def test_the_gate_s_own_limit_reaches_the_service_and_the_store_is_refused(
    service: Service,
) -> None:
    """`max_judge_flip_rate` is a gate option like any other (it was not in the request), and
    fails closed when no flip rate was measured; a store the service refuses is a 422."""
    with service.client("operator") as client:
        limited = _gate(client, "v1", "agent:flip-limited@v1", max_judge_flip_rate=0.1)
        refused = _gate(client, "v1", "agent:flip-limited@v1", store="file:///tmp/elsewhere")
    assert limited.status_code == 200, limited.text
    rules = {rule["rule"]: rule for rule in limited.json()["rules"]}
    assert "judge_flip_rate" in rules and not rules["judge_flip_rate"]["passed"]
    assert "no flip rate measured" in rules["judge_flip_rate"]["detail"]
    assert "store" in _problem(refused, 422)["detail"]


def test_gate_is_200_whatever_the_verdict_and_an_override_changes_only_the_effective_one(
    service: Service,
) -> None:
    with service.client("operator") as client:
        passed = _gate(client, "v1", "agent:gated@v1")
        failed = _gate(client, "v2", "agent:gated@v2")
    assert passed.status_code == failed.status_code == 200
    assert passed.json()["verdict"] == "pass" and passed.json()["reasons"] == []
    report = failed.json()
    assert report["verdict"] == "fail"
    assert [r["rule"] for r in report["reasons"]] == ["pass_rate_below_threshold"]
    assert report["result"]["run_id"] == report["run_id"]
    assert {"warnings", "rules", "unjudged_cases", "effective_verdict"} <= report.keys()
    run_id = report["run_id"]
    reason = "known flaky upstream fixture, tracked in TICKET-1"
    with service.client("admin") as client:
        before = client.get(f"/gates/{run_id}").json()
        granted = client.post("/overrides", json={"run_id": run_id, "reason": reason})
        after = client.get(f"/gates/{run_id}").json()
        again = client.post("/overrides", json={"run_id": run_id, "reason": reason})
    assert (before["recorded"], before["effective"]) == ("fail", "fail")
    assert granted.status_code == 201 and granted.json()["outcome"] == "granted"
    assert (after["recorded"], after["effective"], after["overrides"]) == ("fail", "pass", 1)
    assert _problem(again, 409)["attempt"]["outcome"] == "refused"
    with service.client("viewer") as client:
        _problem(client.get("/gates/no-such-run"), 404)


def test_every_refused_override_is_audited_with_its_status(service: Service) -> None:
    with service.client("operator") as client:
        run_id = _gate(client, "v2", "agent:refused@v2").json()["run_id"]
    with service.client("operator") as client:
        ungated = _run(client, "v1", subject="agent:ungated@v1").json()["run_id"]
    reason = "the threshold is being recalibrated this week"
    attempts = [
        (None, {"run_id": run_id, "reason": reason}, 401),
        ("viewer", {"run_id": run_id, "reason": reason}, 403),
        ("operator", {"run_id": run_id, "reason": reason}, 403),
        ("admin", {"run_id": run_id, "reason": "too short"}, 422),
        ("admin", {"run_id": ungated, "reason": reason}, 404),
    ]
    for tier, body, status in attempts:
        with service.client(tier) as client:
            refused = _problem(client.post("/overrides", json=body), status)
        if tier is None:
            assert "attempt" not in refused and "nothing recorded" in refused["detail"]
            continue
        assert refused["attempt"]["outcome"] == "refused" and "reason" not in refused["attempt"]
        assert "attempt audited" in refused["detail"]
    with service.client(headers={"Authorization": "Bearer assay_forged"}) as client:
        _problem(client.post("/overrides", json={"run_id": run_id, "reason": reason}), 401)
    store = FileStore(service.store_dir)
    audited = audit_records(store, run_id)
    assert [(r.principal, r.outcome) for r in audited] == [
        ("a-viewer", "refused"),
        ("a-operator", "refused"),
        ("root", "refused"),
    ]
    assert [r.outcome for r in audit_records(store, ungated)] == ["refused"]
    with service.client("viewer") as client:
        assert client.get(f"/gates/{run_id}").json()["effective"] == "fail"


def test_scorecards_as_json_and_as_csv_with_a_header(service: Service) -> None:
    with service.client("operator") as client:
        for _ in range(3):
            _run(client, "v1", subject="agent:carded@v1")
    with service.client("viewer") as client:
        rows = client.get("/scorecards", params={"subject": "agent:carded"}).json()
        text = client.get("/scorecards", params={"subject": "agent:carded", "format": "csv"})
        bad = client.get("/scorecards", params={"format": "xml"})
    assert len(rows) == 1 and rows[0]["runs"] == 3 and rows[0]["subject"] == "agent:carded@v1"
    assert text.headers["content-type"].startswith("text/csv")
    parsed = list(csv.DictReader(io.StringIO(text.text)))
    assert text.text.splitlines()[0].startswith("subject,suite,runs,")
    assert [(r["subject"], r["runs"]) for r in parsed] == [("agent:carded@v1", "3")]
    _problem(bad, 422)


def test_findings_newest_first_filtered_and_paginated(service: Service) -> None:
    with service.client("operator") as client:
        base = _run(client, "v1", subject="agent:finder@v1").json()["run_id"]
        regressed = [
            _run(client, "v2", subject="agent:finder@v1", baseline=base).json() for _ in range(2)
        ]
    assert all(r["regression"]["status"] == "regressed" for r in regressed)
    with service.client("viewer") as client:
        query = {"subject": "agent:finder", "kind": "eval_regression", "limit": 1}
        first = client.get("/findings", params=query).json()
        second = client.get("/findings", params={**query, "cursor": first["next_cursor"]}).json()
        later = client.get("/findings", params={**query, "since": "2999-01-01"}).json()
    assert [f["run_id"] for f in first["items"] + second["items"]] == [
        regressed[1]["run_id"],
        regressed[0]["run_id"],
    ]
    assert second["next_cursor"] is None
    assert later == {"items": [], "next_cursor": None}


ROUTES: list[tuple[str, str, str, dict[str, Any] | None]] = [
    ("GET", "/suites", "viewer", None),
    ("GET", "/suites/support-bot", "viewer", None),
    ("GET", "/suites/support-bot/versions/1", "viewer", None),
    ("POST", "/suites", "operator", example_suite()),
    ("GET", "/runs", "viewer", None),
    ("GET", "/runs/no-such-run", "viewer", None),
    ("GET", "/runs/no-such-run/events", "viewer", None),
    ("GET", "/runs/no-such-run/cases", "viewer", None),
    ("POST", "/runs", "operator", {"suite": "nope", "subject": "agent:x", "outputs": []}),
    ("POST", "/gate", "operator", {"suite": "nope", "subject": "agent:x", "outputs": []}),
    ("GET", "/gates/no-such-run", "viewer", None),
    ("POST", "/gate/what-if", "viewer", {"run_id": "no-such-run", "pass_threshold": 0.5}),
    ("POST", "/baselines", "operator", {"run_id": "no-such-run"}),
    ("GET", "/baselines?suite=support-bot&subject=agent:x", "viewer", None),
    ("DELETE", "/baselines?suite=support-bot&subject=agent:tiers", "operator", None),
    ("GET", "/scorecards", "viewer", None),
    ("GET", "/findings", "viewer", None),
]
TIERS = ["viewer", "operator", "admin"]


@pytest.mark.parametrize(("method", "path", "needed", "body"), ROUTES)
def test_every_route_needs_a_token_of_its_tier(
    service: Service, method: str, path: str, needed: str, body: dict[str, Any] | None
) -> None:
    with service.client() as client:
        missing = client.request(method, path, json=body)
    with service.client(headers={"Authorization": "Bearer assay_not-a-token"}) as client:
        unknown = client.request(method, path, json=body)
    with service.client(headers={"Authorization": "Basic cm9vdDpyb290"}) as client:
        other_scheme = client.request(method, path, json=body)
    for response in (missing, unknown, other_scheme):
        _problem(response, 401)
        assert response.headers["www-authenticate"].startswith("Bearer")
    for tier in TIERS:
        with service.client(tier) as client:
            response = client.request(method, path, json=body)
        if TIERS.index(tier) < TIERS.index(needed):
            _problem(response, 403)
        else:
            assert response.status_code not in (401, 403), (tier, response.text)
            assert response.status_code < 500, response.text


def test_idempotency_key_replays_the_first_response_and_refuses_another_body(
    service: Service,
) -> None:
    key = "idem-" + "7" * 20
    headers = {"Idempotency-Key": key}
    with service.client("operator") as client:
        body = {
            "suite": "support-bot",
            "subject": "agent:idem@v1",
            "outputs": example_outputs("v1"),
        }
        first = client.post("/runs", json=body, headers=headers)
        again = client.post("/runs", json=body, headers=headers)
        other = client.post("/runs", json={**body, "seed": 3, "sample": 5}, headers=headers)
        gate_same_key = client.post("/gate", json=body, headers=headers)
        runs = client.get("/runs", params={"subject": "agent:idem"}).json()["items"]
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    _problem(other, 409)
    assert gate_same_key.status_code == 200, "keys are per route"
    gated = gate_same_key.json()["run_id"]
    assert sorted(r["run_id"] for r in runs) == sorted([first.json()["run_id"], gated])
    stored = [p for p in service.store_dir.rglob("*") if p.is_file()]
    assert not [p for p in stored if key.encode() in p.read_bytes()], "keys stored as hashes"
    records = [
        json.loads(p.read_text()) for p in (service.store_dir / "idempotency").rglob("*.json")
    ]
    mine = [r for r in records if r["run_id"] == first.json()["run_id"]]
    assert len(mine) == 1 and set(mine[0]) == {"request_sha256", "run_id", "at"}
    assert re.fullmatch(r"[0-9a-f]{64}", mine[0]["request_sha256"])


def test_concurrent_requests_with_one_key_start_one_run(service: Service) -> None:
    body = {"suite": "support-bot", "subject": "agent:twins@v1", "outputs": example_outputs("v1")}

    async def twice() -> list[httpx.Response]:
        async with service.async_client("operator") as client:
            return list(
                await asyncio.gather(
                    *(
                        client.post("/gate", json=body, headers={"Idempotency-Key": "twins"})
                        for _ in range(3)
                    )
                )
            )

    responses = asyncio.run(twice())
    assert [r.status_code for r in responses] == [200, 200, 200]
    assert len({r.json()["run_id"] for r in responses}) == 1
    with service.client("viewer") as client:
        runs = client.get("/runs", params={"subject": "agent:twins"}).json()["items"]
    assert len(runs) == 1


def test_input_errors_are_422_problems_naming_the_field(service: Service) -> None:
    outputs = example_outputs("v1")
    base = {"suite": "support-bot", "subject": "agent:bad@v1", "outputs": outputs}
    with service.client("operator") as client:
        malformed = client.post(
            "/runs", content='{"suite": ', headers={"content-type": "application/json"}
        )
        no_output = client.post("/runs", json={**base, "outputs": [{"case_id": "x"}]})
        bad_type = client.post(
            "/runs", json={**base, "outputs": [{**outputs[0], "duration_ms": "slow"}]}
        )
        both = client.post("/runs", json={**base, "outputs_uri": "s3://b/p"})
        local = client.post(
            "/runs", json={"suite": "support-bot", "subject": "agent:x", "outputs_uri": "/etc"}
        )
        unknown_field = client.post("/runs", json={**base, "colour": "red"})
        bad_subject = client.post("/runs", json={**base, "subject": "support bot"})
        unknown_case = client.post(
            "/runs", json={**base, "outputs": [*outputs, {"case_id": "nope", "output": "x"}]}
        )
        duplicate = client.post("/runs", json={**base, "outputs": [outputs[0], outputs[0]]})
        sample = client.post("/runs", json={**base, "sample": 0})
        not_object = client.post("/runs", json=[1, 2])
        surrogate = client.post(
            "/runs",
            content='{"suite": "support-bot", "subject": "agent:x", '
            '"outputs": [{"case_id": "a", "output": "x\\ud800y"}]}',
            headers={"content-type": "application/json"},
        )
    with service.client("viewer") as client:
        limit = client.get("/runs", params={"limit": 0})
        cursor = client.get("/runs", params={"cursor": "not-a-cursor"})
        last_event = client.get("/runs/x/events", headers={"Last-Event-ID": "soon"})
        bad_run_id = client.get("/runs/..%2F..%2Fetc")
        since = client.get("/findings", params={"since": "yesterday"})
    assert _problem(malformed, 422)["detail"] == "body: malformed JSON"
    assert _problem(no_output, 422)["field"] == "body.outputs.0.output"
    assert _problem(bad_type, 422)["field"] == "body.outputs.0.duration_ms"
    assert "exactly one of outputs" in _problem(both, 422)["detail"]
    assert "s3://" in _problem(local, 422)["detail"]
    assert _problem(unknown_field, 422)["field"] == "body.colour"
    assert _problem(bad_subject, 422)["detail"].startswith("subject: ")
    unknown = _problem(unknown_case, 422)
    assert unknown["detail"] == (
        f"outputs line {len(outputs) + 1}, field case_id: output for unknown case id 'nope'"
    )
    assert "duplicate output" in _problem(duplicate, 422)["detail"]
    assert _problem(sample, 422)["field"] == "body.sample"
    _problem(not_object, 422)
    assert "lone surrogate" in _problem(surrogate, 422)["detail"]
    assert _problem(limit, 422)["field"] == "query.limit"
    assert _problem(cursor, 422)["field"] == "cursor"
    assert _problem(last_event, 422)["field"] == "header.Last-Event-ID"
    assert bad_run_id.status_code in (404, 422)
    assert _problem(since, 422)["field"] == "query.since"


def test_an_identifier_past_the_file_name_limit_is_422_on_every_route(service: Service) -> None:
    long_id = "r" * 300
    with service.client("operator") as operator:
        assert operator.post("/suites", json=example_suite()).status_code in (200, 201)
        pinned = operator.post("/baselines", json={"run_id": long_id})
        shown = operator.get(
            "/baselines", params={"suite": "support-bot", "subject": "agent:a", "variant": long_id}
        )
        named = operator.get("/baselines", params={"suite": long_id, "subject": "agent:a"})
    with service.client("admin") as admin:
        overridden = admin.post("/overrides", json={"run_id": long_id, "reason": "a reason"})
    for response in (pinned, shown, named, overridden):
        body = _problem(response, 422)
        assert "at most 128 bytes" in json.dumps(body)


def test_unknown_suites_and_runs_are_404(service: Service) -> None:
    with service.client("operator") as client:
        no_suite = client.post(
            "/runs", json={"suite": "no-such-suite", "subject": "agent:x", "outputs": []}
        )
        no_version = client.post(
            "/gate", json={"suite": "support-bot@99", "subject": "agent:x", "outputs": []}
        )
        no_baseline = _run(client, "v1", baseline="no-such-run")
        no_run = client.get("/runs/no-such-run")
        no_events = client.get("/runs/no-such-run/events")
        no_suite_doc = client.get("/suites/no-such-suite")
        no_route = client.get("/nowhere")
    for response in (no_suite, no_version, no_baseline, no_run, no_events, no_suite_doc):
        _problem(response, 404)
    _problem(no_route, 404)


def test_a_body_over_the_limit_is_413(service: Service) -> None:
    big = {"suite": "support-bot", "subject": "agent:big", "outputs": [], "pad": "x" * 1_100_000}

    def chunks() -> Iterator[bytes]:
        data = json.dumps(big).encode()
        for start in range(0, len(data), 65536):
            yield data[start : start + 65536]

    with service.client("operator") as client:
        declared = client.post("/runs", json=big)
        streamed = client.post(
            "/runs", content=chunks(), headers={"content-type": "application/json"}
        )
        suite = client.post("/suites", content=chunks())
    for response in (declared, streamed, suite):
        assert "1 MB" in _problem(response, 413)["detail"]


def test_access_log_lines_carry_method_path_status_and_duration_only(service: Service) -> None:
    with service.client("viewer") as client:
        client.get("/runs", params={"subject": "agent:logged-query-value"})
    time.sleep(0.5)  # the log line is written after the response is sent
    lines = [
        line
        for line in service.log.read_text(errors="replace").splitlines()
        if "assay.api.access" in line
    ]
    assert lines
    pattern = re.compile(r" assay\.api\.access INFO (GET|POST|DELETE|HEAD) /\S* \d{3} [\d.]+ms$")
    assert all(pattern.search(line) for line in lines), lines[:5]
    assert not any("logged-query-value" in line for line in lines)
    assert not any(token in service.log.read_text() for token in service.tokens.values())


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, prefect_api: str) -> Iterator[Service]:
    """A service on the session's Prefect API, one run at a time and no queue."""
    running = start_service(
        tmp_path_factory.mktemp("serve-limited"),
        "--max-concurrent-runs",
        "1",
        "--max-queued-runs",
        "0",
        prefect_api_url=prefect_api,
    )
    with running.client("operator") as client:
        assert client.post("/suites", json=example_suite()).status_code == 201
    try:
        yield running
    finally:
        running.stop()


def test_runs_are_flow_runs_on_the_configured_prefect_api(
    limited: Service, prefect_api: str
) -> None:
    with limited.client("operator") as client:
        result = _run(client, "v1").json()
    # The answer comes once the run's records are complete; its flow run then publishes its
    # artifacts and report, and ends.
    deadline = time.monotonic() + 30
    with httpx.Client(trust_env=False) as client:
        while True:
            flow_run = client.get(f"{prefect_api}/flow_runs/{result['run_id']}").json()
            if flow_run["state"]["type"] != "RUNNING" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert flow_run["name"] == "support-bot@1 · agent:support-bot@v1"
    assert flow_run["state"]["type"] == "COMPLETED"
    assert {"assay", "api", "suite:support-bot"} <= set(flow_run["tags"])
    assert flow_run["parameters"]["options"]["outputs"]["location"].startswith("inline://")
    assert not (limited.prefect_home / "prefect.db").exists(), "no ephemeral API of its own"


def test_runs_beyond_the_pool_and_queue_are_429_with_retry_after(limited: Service) -> None:
    body = {"suite": "support-bot", "subject": "agent:busy@v1", "outputs": example_outputs("v1")}

    async def burst() -> tuple[list[httpx.Response], httpx.Response]:
        async with limited.async_client("operator") as client:
            runs = [asyncio.ensure_future(client.post("/runs", json=body)) for _ in range(4)]
            await asyncio.sleep(0.3)
            read = await client.get("/suites")  # reads do not wait behind runs
            return list(await asyncio.gather(*runs)), read

    responses, read = asyncio.run(burst())
    statuses = sorted(r.status_code for r in responses)
    assert 201 in statuses and 429 in statuses, statuses
    assert set(statuses) <= {201, 429}
    for response in responses:
        if response.status_code == 429:
            _problem(response, 429)
            assert int(response.headers["retry-after"]) >= 1
    assert read.status_code == 200


def test_a_prefect_api_that_does_not_answer_is_503_not_a_failure_of_the_client(
    tmp_path: Path,
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/api"
    down = start_service(tmp_path, prefect_api_url=dead, env={"PREFECT_CLIENT_MAX_RETRIES": "0"})
    try:
        with down.client() as client:
            health = client.get("/healthz")
        with down.client("operator") as client:
            assert client.post("/suites", json=example_suite()).status_code == 201
            refused = _run(client, "v1")
    finally:
        down.stop()
    assert health.status_code == 503
    assert health.json() == {"status": "degraded", "store": True, "prefect": False}
    body = _problem(refused, 503)
    assert body["type"].endswith("/prefect-unavailable")
    assert int(refused.headers["retry-after"]) >= 1


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_canary_in_inline_outputs_is_absent_everywhere_afterwards(service: Service) -> None:
    """Runs last: it stops the service (which flushes Prefect's logs) before searching."""
    outputs = [{**o, "output": f"{o['output']} {CANARY}"} for o in example_outputs("v1")]
    body = {"suite": "support-bot", "subject": "agent:canary@v1", "outputs": outputs}
    with service.client("operator") as client:
        run = client.post("/runs", json=body, headers={"Idempotency-Key": "canary"})
        gate = client.post("/gate", json=body)
        bad = client.post(
            "/runs", json={**body, "outputs": [*outputs, {"case_id": "zz", "output": CANARY}]}
        )
        bad_type = client.post(
            "/runs", json={**body, "outputs": [{**outputs[0], "duration_ms": CANARY}]}
        )
    assert run.status_code == 201 and gate.status_code == 200
    assert bad.status_code == bad_type.status_code == 422
    for response in (run, gate, bad, bad_type):
        assert CANARY not in response.text
    with (
        service.client("viewer") as client,
        connect_sse(client, "GET", f"/runs/{run.json()['run_id']}/events") as source,
    ):
        assert CANARY not in "".join(e.data for e in source.iter_sse())
    service.stop()
    needle = CANARY.encode()
    assert _files_containing(service.store_dir, b"agent:canary"), "the search reads the store"
    assert _files_containing(service.prefect_home, b"agent:canary"), "and Prefect's database"
    for folder in (service.store_dir, service.prefect_home, service.tmp_dir):
        assert _files_containing(folder, needle) == [], folder
    assert needle not in service.log.read_bytes()
