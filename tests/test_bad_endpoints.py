"""Endpoints that cannot work are one line, at once: an S3 endpoint that is not a URL (a scheme
S3 does not speak, a port past 65535) and a Dask `ucx://` address without UCX installed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assay.dask_reference import check_reference
from assay.errors import InputError

BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("endpoint", ["ftp://example.com", "http://127.0.0.1:99999"])
def test_an_s3_endpoint_that_is_not_a_url_is_one_line_at_once(endpoint: str) -> None:
    done = subprocess.run(
        [str(BIN / "assay"), "runs", "list", "--store", "s3://bucket/prefix"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "k",
            "AWS_SECRET_ACCESS_KEY": "s",
            "AWS_DEFAULT_REGION": "us-east-1",
        },
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "the endpoint is not a valid URL" in line and "attempt" not in line


def test_a_ucx_dask_address_without_ucx_is_refused_before_connecting() -> None:
    with pytest.raises(InputError, match="ucx:// needs UCX-Py"):
        check_reference("ucx://127.0.0.1:8786")
