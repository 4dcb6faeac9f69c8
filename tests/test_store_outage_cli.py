"""With the evidence store down or misconfigured, every command says so in one line (exit 2).

Against real servers: a moto server this test stops (connection refused), a bucket that does
not exist on the session's moto server (`NoSuchBucket`), and a TCP listener that accepts
connections and never answers (a hung server), which must be given up on per attempt within
`ASSAY_S3_DEADLINE_SECONDS`, not after the 30 s read timeout.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from assay.cli import app
from assay.s3 import READ_TIMEOUT_SECONDS, make_client
from assay.store import StoreUnavailableError
from assay.store.s3 import S3Store
from tests.conftest import EXAMPLES
from tests.servers import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, RestartableS3Server, S3Server

SUITE = str(EXAMPLES / "support-suite.yaml")
OUTPUTS = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")


def _one_line_exit_2(*args: str) -> str:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 2, (args, result.output, result.exception)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, (args, result.output)
    assert "Traceback" not in result.output
    return lines[0]


def _short_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ASSAY_S3_MAX_ATTEMPTS", "2")
    monkeypatch.setenv("ASSAY_S3_DEADLINE_SECONDS", "1")


@pytest.mark.parametrize(
    "command",
    [
        ["runs", "list"],
        ["scorecard"],
        ["suite", "list"],
        ["baseline", "show", "support-bot", "agent:bot"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_read_commands_with_the_store_down_print_one_line(
    restartable_moto: RestartableS3Server, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    _short_retries(monkeypatch)
    uri = restartable_moto.use_from_env(monkeypatch)
    restartable_moto.stop()

    line = _one_line_exit_2(*command, "--store", uri)

    assert line.startswith("error: StoreUnavailableError: ")
    assert restartable_moto.endpoint_url in line and "attempt(s)" in line


@pytest.mark.parametrize(
    "command",
    [
        ["run", SUITE, "--outputs", OUTPUTS],
        ["runs", "show", "2b0c3f6e-0000-4000-8000-000000000000"],
        ["suite", "publish", SUITE],
        ["runs", "list"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_a_missing_bucket_is_one_line_naming_it(
    moto_s3: S3Server, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    moto_s3.use_from_env(monkeypatch)
    uri = "s3://assay-no-such-bucket-7f3e/assay"

    line = _one_line_exit_2(*command, "--store", uri)

    assert "StoreUnavailableError" in line and "NoSuchBucket" in line
    assert "assay-no-such-bucket-7f3e" in line


@pytest.fixture
def hung_server() -> Iterator[str]:
    """A listener that completes TCP handshakes (the kernel does) but never reads or answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_one_attempt_against_a_hung_server_ends_within_the_deadline(
    hung_server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASSAY_S3_MAX_ATTEMPTS", "1")
    monkeypatch.setenv("ASSAY_S3_DEADLINE_SECONDS", "1")
    client = make_client(
        endpoint_url=hung_server,
        access_key_id=ACCESS_KEY_ID,
        secret_access_key=SECRET_ACCESS_KEY,
        region=REGION,
    )
    store = S3Store("bucket", "assay", client=client)

    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as caught:
        store.get("runs/x/aggregate.json")
    elapsed = time.monotonic() - started

    assert "ReadTimeoutError" in str(caught.value)
    # Not a performance figure: the attempt must end on the 1 s deadline, not the 30 s read
    # timeout it waited for before (a wide margin for a loaded machine).
    assert elapsed < READ_TIMEOUT_SECONDS / 2


def test_the_store_down_during_run_start_is_one_line(
    restartable_moto: RestartableS3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _short_retries(monkeypatch)
    uri = restartable_moto.use_from_env(monkeypatch)
    restartable_moto.stop()

    line = _one_line_exit_2("run", SUITE, "--outputs", OUTPUTS, "--store", uri)

    assert "StoreUnavailableError" in line
