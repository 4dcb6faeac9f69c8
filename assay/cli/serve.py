"""`assay serve`: the HTTP service (FastAPI under uvicorn)."""

from __future__ import annotations

import importlib
import logging
import os
import socket
import sys
from typing import Annotated, Final

import typer

from assay.cli import _common as common
from assay.cli.local_service import LOCAL_TOKEN_ENV, LOOPBACK
from assay.reports import REPORTS_URL_ENV

SERVICE_MODULES: Final = {
    "fastapi": "fastapi",
    "uvicorn": "uvicorn",
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2": "opentelemetry-proto",
    "fastapi_offline": "fastapi-offline",
}
"""What the service imports beyond the core (module: its distribution). Prefect brings FastAPI
and uvicorn; `POST /v1/traces` needs opentelemetry-proto and `/docs` the Swagger UI and ReDoc
assets of fastapi-offline, which only the `serve` extra brings."""


def missing_distributions() -> list[str]:
    """The distributions of `SERVICE_MODULES` that cannot be imported here."""
    missing = []
    for module, distribution in SERVICE_MODULES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(distribution)
    return missing


WILDCARD_HOSTS: Final = ("0.0.0.0", "::", "")


def _own_url(host: str, port: int) -> str:
    """The address this service answers at, as a link names it: a wildcard `--host` by the
    machine's name (`$ASSAY_REPORTS_URL` names another, behind a proxy)."""
    named = socket.gethostname() if host in WILDCARD_HOSTS else host
    return f"http://[{named}]:{port}" if ":" in named else f"http://{named}:{port}"


@common.app.command("serve")
def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.", min=1, max=65535)] = 8765,
    store: common.StoreOption = None,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", help="Largest request body in MB (413).", min=0.001)
    ] = 32,
    max_concurrent_runs: Annotated[
        int, typer.Option("--max-concurrent-runs", help="Runs executing at once.", min=1)
    ] = 4,
    max_queued_runs: Annotated[
        int,
        typer.Option("--max-queued-runs", help="Runs waiting for a slot; beyond, 429.", min=0),
    ] = 16,
    keepalive_seconds: Annotated[
        float,
        typer.Option(
            "--keepalive-seconds",
            help="Silence after which a run's event stream sends a keep-alive comment.",
            min=0.001,
        ),
    ] = 15,
) -> None:
    """Serve the HTTP API (docs/api.md); every route but /healthz and /livez needs a Bearer token.

    Needs the `serve` extra (`pip install 'assay[serve]'`); without it, refuses to start.
    """
    missing = missing_distributions()
    if missing:
        common.fail(
            f"assay serve needs {', '.join(missing)}, which is not installed: "
            "pip install 'assay[serve]'"
        )
    common.prefect_defaults(must_answer=False)
    import uvicorn

    from assay.api import ServeSettings, create_app

    # The lasting local service's credential comes by environment, never on the command line
    # (`ps` shows that to every user), and only a loopback service may hold it.
    local_token = os.environ.pop(LOCAL_TOKEN_ENV, None)
    if local_token and host not in LOOPBACK:
        common.fail(f"{LOCAL_TOKEN_ENV} is for a service on loopback only, not --host {host}")
    settings = ServeSettings(
        store=store,
        max_body_mb=max_body_mb,
        max_concurrent_runs=max_concurrent_runs,
        max_queued_runs=max_queued_runs,
        keepalive_seconds=keepalive_seconds,
        local_token=local_token or None,
    )
    # The flows this service runs link their report to it (Prefect's artifact), not the store.
    os.environ.setdefault(REPORTS_URL_ENV, _own_url(host, port))
    service = common.guarded(lambda: create_app(settings))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in ("assay.api", "assay.api.access"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.INFO)
        logger.addHandler(handler)
        logger.propagate = False
    # uvicorn's own access log would print query strings; ours prints method, path, status, time.
    uvicorn.run(service, host=host, port=port, access_log=False, log_level="info")
