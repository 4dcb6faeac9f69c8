"""The S3 evidence store against real S3-compatible servers (moto and rclone) over HTTP.

Nothing is mocked: the store's boto3 client talks to server subprocesses (tests/servers.py).
moto enforces conditional writes; rclone ignores them, so the store must detect that and guard
write-once objects by reading first. Fault injection stops and restarts a server mid-run.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    ProfileNotFound,
    ReadTimeoutError,
)

from assay import progress
from assay.errors import EvidenceConflictError, NotFoundError
from assay.runs.chunks import chunk_key, read_chunk
from assay.runs.records import RunStatus, load_aggregate, load_result
from assay.s3 import (
    DEADLINE_ENV,
    MAX_ATTEMPTS_ENV,
    ObjectReader,
    is_transient,
    make_client,
)
from assay.schemes import open_store
from assay.schemes.s3 import parse_s3_uri
from assay.store import StoreUnavailableError
from assay.store.s3 import PROBE_PREFIX, S3Store
from assay.suites import registry
from assay.suites.suite import load_suite
from tests.launched import suite_run
from tests.servers import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY

if TYPE_CHECKING:
    from tests.servers import RestartableS3Server, S3Server


@pytest.fixture(params=["moto", "rclone"])
def server(request: pytest.FixtureRequest) -> S3Server:
    """Each session server in turn."""
    found: S3Server = request.getfixturevalue(f"{request.param}_s3")
    return found


@pytest.fixture
def store(server: S3Server) -> S3Store:
    """A store on a fresh bucket of the server under test, under the prefix `assay/`."""
    return server.store()


def _short_retries(monkeypatch: pytest.MonkeyPatch, attempts: int, deadline: float) -> None:
    monkeypatch.setenv(MAX_ATTEMPTS_ENV, str(attempts))
    monkeypatch.setenv(DEADLINE_ENV, str(deadline))


# --- URIs and error classification (pure functions) ---------------------------------------------


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://bucket", ("bucket", "")),
        ("s3://bucket/", ("bucket", "")),
        ("s3://bucket/some/prefix", ("bucket", "some/prefix/")),
        ("s3://bucket/some/prefix/", ("bucket", "some/prefix/")),
    ],
)
def test_parse_s3_uri_normalises_the_prefix(uri: str, expected: tuple[str, str]) -> None:
    assert parse_s3_uri(uri) == expected


@pytest.mark.parametrize(
    ("uri", "problem"),
    [
        ("file://x", "not an S3 URI"),
        ("bucket/prefix", "not an S3 URI"),
        ("s3://", "names no bucket"),
        ("s3:///prefix", "names no bucket"),
        ("s3://bucket/a//b", "path segment"),
        ("s3://bucket/a/../b", "path segment"),
    ],
)
def test_parse_s3_uri_rejects_bad_uris(uri: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_s3_uri(uri)


def _client_error(code: str, status: int) -> ClientError:
    """The error botocore raises for an S3 error response (only the fields S3 always sends)."""
    response: Any = {
        "Error": {"Code": code, "Message": "m"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return ClientError(response, "PutObject")


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (_client_error("SlowDown", 503), True),
        (_client_error("ThrottlingException", 400), True),
        (_client_error("RequestLimitExceeded", 400), True),
        (_client_error("", 429), True),
        (_client_error("InternalError", 500), True),
        (_client_error("502", 502), True),
        (_client_error("RequestTimeout", 400), True),
        (_client_error("ConditionalRequestConflict", 409), True),
        (EndpointConnectionError(endpoint_url="http://127.0.0.1:1"), True),
        (ReadTimeoutError(endpoint_url="http://127.0.0.1:1"), True),
        (ConnectionResetError(), True),
        (_client_error("PreconditionFailed", 412), False),
        (_client_error("NoSuchKey", 404), False),
        (_client_error("AccessDenied", 403), False),
        (ValueError("bad"), False),
    ],
)
def test_is_transient(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient


# --- the store on both servers ------------------------------------------------------------------


def test_put_once_never_overwrites(store: S3Store) -> None:
    assert store.put_once("runs/r1/cases/000000.json", b"first") is True
    assert store.put_once("runs/r1/cases/000000.json", b"first") is False  # identical: no-op

    with pytest.raises(EvidenceConflictError, match=r"runs/r1/cases/000000\.json"):
        store.put_once("runs/r1/cases/000000.json", b"second")
    assert store.put_once_if_absent("runs/r1/cases/000000.json", b"third") is False

    assert store.get("runs/r1/cases/000000.json") == b"first"


def test_conditional_writes_are_probed_once_and_the_probe_cleans_up(
    server: S3Server, store: S3Store
) -> None:
    assert store.conditional_writes is None  # nothing probed before the first write-once object
    store.put("runs/r1/aggregate.json", b"{}")
    assert store.conditional_writes is None

    store.put_once("a.json", b"a")
    store.put_once("b.json", b"b")

    assert store.conditional_writes is (server.name == "moto")
    assert list(store.list(PROBE_PREFIX)) == []
    assert set(store.list("")) == {
        "a.json",
        "b.json",
        "runs/r1/aggregate.json",
    }


def test_rclone_ignores_if_none_match_but_the_store_still_refuses_overwrites(
    rclone_s3: S3Server,
) -> None:
    store = rclone_s3.store()
    client = rclone_s3.client()
    key = f"{store.prefix}raw.json"
    client.put_object(Bucket=store.bucket, Key=key, Body=b"1", IfNoneMatch="*")
    client.put_object(Bucket=store.bucket, Key=key, Body=b"2", IfNoneMatch="*")  # not refused
    assert client.get_object(Bucket=store.bucket, Key=key)["Body"].read() == b"2"

    store.put_once("evidence.json", b"kept")
    with pytest.raises(EvidenceConflictError):
        store.put_once("evidence.json", b"replaced")
    assert store.conditional_writes is False
    assert store.get("evidence.json") == b"kept"


def test_moto_refuses_a_second_conditional_write_with_412(moto_s3: S3Server) -> None:
    bucket = moto_s3.create_bucket()
    client = moto_s3.client()
    client.put_object(Bucket=bucket, Key="k", Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as caught:
        client.put_object(Bucket=bucket, Key="k", Body=b"2", IfNoneMatch="*")
    assert caught.value.response["Error"]["Code"] == "PreconditionFailed"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412


def test_put_get_exists_and_missing_objects(store: S3Store) -> None:
    store.put("runs/r1/aggregate.json", b"v1")
    store.put("runs/r1/aggregate.json", b"v2")  # the aggregate is mutable

    assert store.get("runs/r1/aggregate.json") == b"v2"
    assert store.exists("runs/r1/aggregate.json") is True
    assert store.exists("runs/r1/result.json") is False
    with pytest.raises(NotFoundError, match=r"runs/r1/result\.json"):
        store.get("runs/r1/result.json")
    with pytest.raises(NotFoundError):
        ObjectReader(store.client).read(store.bucket, f"{store.prefix}runs/r1/result.json", 0, 4)
    with pytest.raises(ValueError, match="invalid evidence key"):
        store.get("runs//x")


def test_the_object_reader_reads_a_slice_like_bytes_slicing(store: S3Store) -> None:
    data = b"0123456789"
    store.put("outputs/part.jsonl", data)
    reader, key = ObjectReader(store.client), f"{store.prefix}outputs/part.jsonl"

    for start, end in [(0, 10), (2, 5), (9, 10), (8, 20), (4, 4), (10, 12), (12, 20)]:
        assert reader.read(store.bucket, key, start, end) == data[start:end]
    with pytest.raises(ValueError, match="invalid byte range"):
        reader.read(store.bucket, key, 5, 2)
    assert reader.keys(store.bucket, f"{store.prefix}outputs/") == [key]


def test_evidence_storage_honours_its_aws_credentials_profile_and_client_parameters(
    moto_s3: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the AwsCredentials block says where and as whom: a named profile (keys and region
    in the shared files) and `aws_client_parameters.endpoint_url`, nothing in the environment."""
    from prefect_aws import AwsClientParameters, AwsCredentials

    from blocks import EvidenceStorage

    (tmp_path / "credentials").write_text(
        f"[assay-test]\naws_access_key_id = {ACCESS_KEY_ID}\n"
        f"aws_secret_access_key = {SECRET_ACCESS_KEY}\n"
    )
    (tmp_path / "config").write_text(f"[profile assay-test]\nregion = {REGION}\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    for variable in (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_PROFILE",
        "AWS_DEFAULT_REGION",
        "AWS_REGION",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
    ):
        monkeypatch.delenv(variable, raising=False)
    bucket = moto_s3.create_bucket()

    def storage(profile: str) -> EvidenceStorage:
        return EvidenceStorage(
            url=f"s3://{bucket}/assay",
            aws_credentials=AwsCredentials(
                profile_name=profile,
                aws_client_parameters=AwsClientParameters(endpoint_url=moto_s3.endpoint_url),
            ),
        )

    store = storage("assay-test").open()
    assert isinstance(store, S3Store)
    assert store.put_once("runs/r1/result.json", b"{}") is True
    assert store.get("runs/r1/result.json") == b"{}"
    assert store.client.meta.endpoint_url == moto_s3.endpoint_url
    assert store.client.meta.region_name == REGION
    with pytest.raises(ProfileNotFound):
        storage("no-such-profile").open()


def test_keys_live_under_the_prefix_and_list_is_relative_sorted_and_folder_scoped(
    server: S3Server, store: S3Store
) -> None:
    for key in ["runs/x/b.json", "runs/x/a.json", "runs/xy/c.json", "index/runs/x.json"]:
        store.put(key, b"{}")
    server.client().put_object(Bucket=store.bucket, Key="elsewhere/d.json", Body=b"{}")

    assert list(store.list("runs/x")) == ["runs/x/a.json", "runs/x/b.json"]
    assert list(store.list("runs/")) == ["runs/x/a.json", "runs/x/b.json", "runs/xy/c.json"]
    assert list(store.list("")) == [
        "index/runs/x.json",
        "runs/x/a.json",
        "runs/x/b.json",
        "runs/xy/c.json",
    ]
    raw = server.client().list_objects_v2(Bucket=store.bucket, Prefix="assay/")
    assert {item["Key"] for item in raw.get("Contents", [])} == {
        f"assay/{key}" for key in store.list("")
    }
    assert store.uri == f"s3://{store.bucket}/assay"


def test_list_starting_takes_a_prefix_that_ends_inside_a_name(
    server: S3Server, store: S3Store
) -> None:
    ours = ["d/run-1-000000.json", "d/run-1-000001-pab.json", "d/run-1-x/deeper.json"]
    for key in ["d/run-10-000000.json", "d/run-2-000000.json", "e/run-1-000000.json", *ours]:
        store.put(key, b"{}")
    server.client().put_object(Bucket=store.bucket, Key="d/run-1-outside.json", Body=b"{}")

    assert list(store.list_starting("d/run-1-")) == sorted(ours)
    assert list(store.list_starting("d/")) == list(store.list("d/"))
    assert list(store.list_starting("nothing/run-")) == []
    assert list(store.list("d/run-1-")) == []  # `list` keeps to folders, as before


def test_list_pages_past_1000_keys(server: S3Server, store: S3Store) -> None:
    keys = [f"runs/big/cases/{n:06d}.json" for n in range(1100)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda key: store.put(key, b"{}"), keys))
    store.put("runs/other/cases/000000.json", b"{}")

    assert list(store.list("runs/big/cases/")) == keys


def test_open_store_reads_endpoint_and_credentials_from_the_environment(
    s3_env: str, moto_s3: S3Server
) -> None:
    opened = open_store(s3_env)

    assert isinstance(opened, S3Store)
    assert opened.uri == s3_env
    assert opened.client.meta.endpoint_url == moto_s3.endpoint_url  # boto3 read AWS_ENDPOINT_URL
    assert make_client().meta.endpoint_url == moto_s3.endpoint_url
    opened.put_once("hello.json", b"{}")
    assert open_store(s3_env).get("hello.json") == b"{}"


# --- transient failures -------------------------------------------------------------------------


def test_an_unreachable_store_fails_fast_with_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _short_retries(monkeypatch, attempts=3, deadline=2)
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))  # bound but never listening: connections are refused
        endpoint = f"http://127.0.0.1:{reserved.getsockname()[1]}"
        store = S3Store(
            "evidence",
            "assay",
            client=make_client(endpoint, "testing", "testing", region="us-east-1"),
        )

        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as caught:
            store.get("runs/r1/result.json")
        elapsed = time.monotonic() - started

    message = str(caught.value)
    assert endpoint in message
    assert "get_object" in message and "s3://evidence/assay/runs/r1/result.json" in message
    assert "after 3 attempt(s)" in message and "EndpointConnectionError" in message
    assert "\n" not in message
    assert isinstance(caught.value.__cause__, EndpointConnectionError)
    assert elapsed < 5


def test_retries_bridge_a_restart_and_a_lost_bucket_is_not_a_missing_object(
    restartable_moto: RestartableS3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    _short_retries(monkeypatch, attempts=20, deadline=20)
    store = restartable_moto.store()
    store.put_once("a.json", b"a")
    restartable_moto.stop()
    restart = threading.Timer(1.0, restartable_moto.start)
    restart.start()

    started = time.monotonic()
    # Connection errors are retried until moto is back; moto keeps nothing across a restart,
    # and a missing bucket is reported as such, not as a missing object.
    with pytest.raises(StoreUnavailableError) as caught:
        store.get("a.json")
    restart.join()

    assert "NoSuchBucket" in str(caught.value)
    assert isinstance(caught.value.__cause__, ClientError)
    assert time.monotonic() - started >= 0.9


# --- fault injection during a suite run ---------------------------------------------------------

CASES = 300
CHUNK_SIZE = 50
CHUNKS = CASES // CHUNK_SIZE


def _publish_suite(store: S3Store, tmp_path: Path) -> tuple[str, Path, list[str]]:
    """A 300-case suite published to `store`, and local outputs for every case."""
    ids = [f"case-{n:04d}" for n in range(CASES)]
    suite_file = tmp_path / "suite.json"
    suite_file.write_text(
        json.dumps(
            {
                "suite": "outage",
                "cases": [{"id": i, "input": "q", "scorers": [{"contains": "ok"}]} for i in ids],
            }
        )
    )
    version, _ = registry.publish(store, load_suite(suite_file))
    outputs = tmp_path / "outputs.jsonl"
    outputs.write_text(
        "".join(
            json.dumps({"case_id": i, "output": "ok" if n % 4 else "no"}) + "\n"
            for n, i in enumerate(ids)
        )
    )
    return version.ref, outputs, ids


def _assert_each_case_recorded_once(store: S3Store, run_id: str, case_ids: list[str]) -> None:
    assert list(store.list(f"runs/{run_id}/cases/")) == [
        chunk_key(run_id, n) for n in range(CHUNKS)
    ]
    recorded = [case.case_id for n in range(CHUNKS) for case in read_chunk(store, run_id, n).cases]
    assert sorted(recorded) == sorted(case_ids)  # none missing, none twice
    result = load_result(store, run_id)
    assert (result.metrics.cases, result.metrics.passed) == (CASES, CASES - CASES // 4)
    assert result.metrics.write_guard == "read-before-write"  # rclone ignores If-None-Match
    assert load_aggregate(store, run_id).status is RunStatus.COMPLETED


@pytest.mark.usefixtures("prefect_api")
def test_a_suite_run_rides_out_a_short_store_outage(
    restartable_rclone: RestartableS3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _short_retries(monkeypatch, attempts=30, deadline=20)
    uri = restartable_rclone.use_from_env(monkeypatch)
    store = open_store(uri)
    assert isinstance(store, S3Store)
    ref, outputs, ids = _publish_suite(store, tmp_path)
    restart = threading.Timer(1.5, restartable_rclone.start)

    def outage(done: int, total: int) -> None:
        if done == 2:  # the server goes away between chunks 2 and 3 and is back 1.5 s later
            restartable_rclone.stop()
            restart.start()

    with progress.listening(outage):
        result = suite_run(suite=ref, outputs=str(outputs), store=uri, chunk_size=CHUNK_SIZE)
    restart.join()

    _assert_each_case_recorded_once(store, result.run_id, ids)


@pytest.mark.usefixtures("prefect_api")
def test_a_store_that_stays_down_fails_the_run_clearly_and_a_rerun_completes_it(
    restartable_rclone: RestartableS3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _short_retries(monkeypatch, attempts=4, deadline=1.5)
    uri = restartable_rclone.use_from_env(monkeypatch)
    store = open_store(uri)
    assert isinstance(store, S3Store)
    ref, outputs, ids = _publish_suite(store, tmp_path)
    run_id = str(uuid4())

    def outage(done: int, total: int) -> None:
        if done == 2:
            restartable_rclone.stop()

    with progress.listening(outage), pytest.raises(StoreUnavailableError) as caught:
        suite_run(suite=ref, outputs=str(outputs), store=uri, chunk_size=CHUNK_SIZE, run_id=run_id)

    assert restartable_rclone.endpoint_url in str(caught.value)
    assert "attempt(s)" in str(caught.value)
    restartable_rclone.start()
    before = {key: store.get(key) for key in store.list(f"runs/{run_id}/cases/")}
    # Chunks run in parallel with the progress reports: the two reported chunks were written,
    # and chunks already in flight when the store went down may have been written too.
    assert {chunk_key(run_id, n) for n in range(2)} <= set(before)
    assert set(before) <= {chunk_key(run_id, n) for n in range(CHUNKS)}

    result = suite_run(
        suite=ref, outputs=str(outputs), store=uri, chunk_size=CHUNK_SIZE, run_id=run_id
    )

    assert result.run_id == run_id
    _assert_each_case_recorded_once(store, run_id, ids)
    assert {key: store.get(key) for key in before} == before  # kept, not rewritten
