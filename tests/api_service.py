"""`assay serve` as a real process on a free loopback port, for the API tests and benchmark.

Each service gets its own evidence store, PREFECT_HOME and TMPDIR under one root folder, so a
test can search everything the service (and the ephemeral Prefect API it starts) wrote, and
principals of every tier, whose tokens the service only knows by their hashes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml

from assay.gate import access
from assay.gate.access import Tier
from assay.store import EvidenceStore, FileStore
from tests.servers import BIN, ServerProcess, free_port

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
START_TIMEOUT_SECONDS = 240.0
"""Start-up includes the ephemeral Prefect API's (≈15 s idle, far more on a busy 2-core box)."""


def example_suite() -> dict[str, Any]:
    """The example support-bot suite (50 cases) as the JSON document `POST /suites` takes."""
    document: dict[str, Any] = yaml.safe_load((EXAMPLES / "support-suite.yaml").read_text())
    return document


def example_outputs(version: str) -> list[dict[str, Any]]:
    """The example outputs of `support-bot@VERSION` (v1 or v2) as inline outputs."""
    path = EXAMPLES / "outputs" / f"support-bot-{version}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@dataclass
class Service:
    """A running `assay serve` and what a test needs to call it and search what it wrote."""

    process: ServerProcess
    root: Path
    tokens: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.process.endpoint_url

    @property
    def store_dir(self) -> Path:
        return self.root / "store"

    @property
    def prefect_home(self) -> Path:
        return self.root / "prefect-home"

    @property
    def tmp_dir(self) -> Path:
        return self.root / "tmp"

    @property
    def log(self) -> Path:
        return self.process.log

    def _headers(self, tier: str | None, extra: Mapping[str, str]) -> dict[str, str]:
        return {**({"Authorization": f"Bearer {self.tokens[tier]}"} if tier else {}), **extra}

    def client(self, tier: str | None = None, headers: Mapping[str, str] = {}) -> httpx.Client:
        """An httpx client for the service, with a token of `tier` (None: no token)."""
        return httpx.Client(
            base_url=self.url, headers=self._headers(tier, headers), timeout=300, trust_env=False
        )

    def async_client(self, tier: str | None = None) -> httpx.AsyncClient:
        """An async httpx client, as `client`."""
        return httpx.AsyncClient(
            base_url=self.url, headers=self._headers(tier, {}), timeout=300, trust_env=False
        )

    def stop(self) -> None:
        self.process.stop()


def start_service(
    root: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    prefect_api_url: str | None = None,
    store: EvidenceStore | None = None,
) -> Service:
    """Start `assay serve --store file://ROOT/store ARGS…` (or `--store` the given `store`) with
    principals of every tier.

    Without `prefect_api_url` the service starts its own ephemeral Prefect API (under
    ROOT/prefect-home); with it, the service must use that server.
    """
    service_env = {**os.environ, **(env or {})}
    service_env.pop("PREFECT_API_URL", None)
    if prefect_api_url:
        service_env["PREFECT_API_URL"] = prefect_api_url
    service_env["PREFECT_HOME"] = str(root / "prefect-home")
    service_env["TMPDIR"] = str(root / "tmp")
    for folder in ("store", "prefect-home", "tmp"):
        (root / folder).mkdir(parents=True, exist_ok=True)
    store = store or FileStore(root / "store")
    tokens = {"admin": access.add_principal(store, "root", Tier.ADMIN)}
    for tier in (Tier.OPERATOR, Tier.VIEWER):
        tokens[tier.value] = access.add_principal(
            store, f"a-{tier.value}", tier, by_token=tokens["admin"]
        )
    port = free_port()
    command = [str(BIN / "assay"), "serve", "--port", str(port), "--store", store.uri, *args]
    process = ServerProcess(
        command, port, root / "serve.log", env=service_env, timeout=START_TIMEOUT_SECONDS
    )
    process.start()
    return Service(process=process, root=root, tokens=tokens)
