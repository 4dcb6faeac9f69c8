"""`assay serve` without what the service needs refuses to start with one line naming the extra.

`opentelemetry-proto` is made unimportable for a real `assay serve` process by a PYTHONPATH
folder whose `opentelemetry/proto/__init__.py` raises ImportError (as if it were not installed).
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from tests.servers import BIN, free_port


def test_serve_without_opentelemetry_proto_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    stub = tmp_path / "stub" / "opentelemetry" / "proto"
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text("raise ImportError('opentelemetry-proto is not installed')\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(tmp_path / "stub"), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
    }
    env.pop("PREFECT_API_URL", None)
    command = [str(BIN / "assay"), "serve", "--port", str(free_port())]
    command += ["--store", f"file://{tmp_path / 'store'}"]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # the service and the Prefect API it started
        process.communicate()
        raise AssertionError("assay serve started without opentelemetry-proto") from None
    lines = stderr.decode().strip().splitlines()
    assert process.returncode == 2, stderr[-2000:]
    assert len(lines) == 1, stderr[-2000:]
    assert "opentelemetry-proto" in lines[0] and "pip install 'assay[serve]'" in lines[0]
    assert stdout == b""
