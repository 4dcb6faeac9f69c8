"""`/healthz` tells a store that lists but takes no write (read-only, full) from a healthy one:
a service whose every write answers 503 is `degraded`, not `ok`."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.store import FileStore
from tests.api_service import start_service


@pytest.fixture
def mounted(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of this test's own (root may mount; skipped where it may not)."""
    where = tmp_path / "mnt"
    where.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(where)]).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=True)


def test_a_store_that_takes_no_writes_makes_healthz_degraded(tmp_path: Path, mounted: Path) -> None:
    service = start_service(tmp_path, store=FileStore(mounted / "store"))
    try:
        with service.client() as client:
            assert client.get("/healthz").json() == {"status": "ok", "store": True, "prefect": True}
            subprocess.run(["mount", "-o", "remount,ro", str(mounted)], check=True)
            health = client.get("/healthz")
    finally:
        service.stop()
    assert health.status_code == 503
    assert health.json() == {"status": "degraded", "store": False, "prefect": True}
