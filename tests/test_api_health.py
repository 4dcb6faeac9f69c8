"""`/healthz` tells a store that lists but takes no write (read-only, full) from a healthy one:
a service whose every write answers 503 is `degraded`, not `ok`. `/livez` says only that the
service answers, whatever its store and Prefect API do."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import prefect
import pytest

from assay.store import FileStore
from tests.api_service import start_service
from tests.local_http import JsonHandler


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


class _PrefectHealth(JsonHandler):
    """A Prefect API that answers its health check and its version (asked once by a client)."""

    def answer(self, method: str, path: str) -> tuple[int, object]:
        answers = {"/api/health": True, "/api/admin/version": prefect.__version__}
        return (200, answers[path]) if path in answers else (404, {})


def test_healthz_sees_a_prefect_api_that_stops_answering_between_probes(tmp_path: Path) -> None:
    # The probe's Prefect client lasts between probes (`flows.local`): it must still tell.
    api_server = ThreadingHTTPServer(("127.0.0.1", 0), _PrefectHealth)
    threading.Thread(target=api_server.serve_forever, daemon=True).start()
    api = f"http://127.0.0.1:{api_server.server_port}/api"
    service = start_service(tmp_path, prefect_api_url=api, env={"PREFECT_CLIENT_MAX_RETRIES": "0"})
    try:
        with service.client() as client:
            up = [client.get("/healthz").json()["prefect"] for _ in range(3)]
            api_server.shutdown()
            api_server.server_close()
            down = client.get("/healthz")
            alive = client.get("/livez")
    finally:
        service.stop()
    assert up == [True, True, True]
    assert down.status_code == 503
    assert down.json() == {"status": "degraded", "store": True, "prefect": False}
    assert (alive.status_code, alive.json()) == (200, {"status": "alive"})  # no token either
