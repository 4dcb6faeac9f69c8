"""`assay server start|status|stop`: a lasting local Prefect server, with its UI, and the Assay
service beside it, between commands.

The Prefect server is Prefect's own (`prefect server start --background`); its PID file and
database live under `PREFECT_HOME`, and `assay-server.json` beside them records where it listens,
so that every later command (see `assay.cli.orchestration`) sends its runs there. The Assay
service (`assay serve` on loopback, `assay.cli.local_service`) runs them: a command that goes
through it pays a request, not Prefect's import and flow start-up.
"""

from __future__ import annotations

import time
from typing import Annotated

import typer

from assay.cli import local_service, orchestration
from assay.cli._common import JsonOption, StoreOption, app, fail, out, print_json
from assay.cli.orchestration import DEFAULT_HOST, DEFAULT_PORT

server_app = typer.Typer(
    help="Keep a local Prefect server (API and UI) and the Assay service running between commands.",
    no_args_is_help=True,
)
app.add_typer(server_app, name="server")

EXIT_NOT_RUNNING = 1
PREFECT_PID_FILE = "server.pid"


@server_app.command("start")
def server_start(
    port: Annotated[int, typer.Option("--port", help="Port of the API and UI.")] = DEFAULT_PORT,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = DEFAULT_HOST,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the server to answer.")
    ] = 180.0,
    service_port: Annotated[
        int,
        typer.Option(
            "--service-port",
            help="Port of the Assay service (loopback only; another when it is taken).",
        ),
    ] = local_service.DEFAULT_PORT,
    store: StoreOption = None,
) -> None:
    """Start Prefect's server and the Assay service in the background; every assay command then
    goes through them."""
    try:
        running = orchestration.running_server() or local_service.start_prefect(host, port, timeout)
        service = local_service.running()
        if service is not None and service.store != local_service.canonical_store(store):
            local_service.stop()  # it keeps another store: this one is asked for
            service = None
        if service is None:
            service = local_service.start(store, running.api_url, service_port, timeout)
    except local_service.NotStartedError as exc:
        fail(str(exc))
    out.print(
        f"Prefect UI at {running.ui_url}; Assay service at {service.url} (store "
        f"{service.store}).\nReports at {service.url}/runs/RUN_ID/report (the link on each "
        "run's Artifacts tab in the Prefect UI; `assay report RUN_ID` writes one to a file).\n"
        "Every assay command now goes through them; "
        "`assay server stop` stops both.",
        highlight=False,
    )


@server_app.command("status")
def server_status(as_json: JsonOption = False) -> None:
    """Say whether the lasting server and the Assay service are up (exit 0) or not (exit 1)."""
    state = orchestration.read_state()
    up = state is not None and orchestration.healthy(state.api_url)
    service = local_service.running()
    if as_json:
        print_json(
            {
                "running": up,
                "ui_url": state.ui_url if state else None,
                "api_url": state.api_url if state else None,
                "pid": state.pid if state else None,
                "service": None
                if service is None
                else {
                    "url": service.url,
                    "store": service.store,
                    "pid": service.pid,
                    "commands_pid": service.commands_pid,
                },
            }
        )
    else:
        if up and state is not None:
            out.print(f"running: Prefect UI at {state.ui_url} (pid {state.pid})", highlight=False)
        else:
            out.print("not running: `assay server start` starts it", highlight=False)
        if service is not None:
            out.print(
                f"running: Assay service at {service.url}, store {service.store} "
                f"(pid {service.pid})",
                highlight=False,
            )
            if service.commands_pid is not None:
                out.print(
                    f"running: the warm command process (pid {service.commands_pid}): commands "
                    "start in a fork of it",
                    highlight=False,
                )
        else:
            out.print("not running: the Assay service (`assay server start` starts it)")
    raise typer.Exit(0 if up and service is not None else EXIT_NOT_RUNNING)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the Assay service and the lasting server (runs stay in its database for the next
    start)."""
    stopped = local_service.stop()
    if stopped is not None:
        out.print(f"Assay service at {stopped.url} stopped", highlight=False)
    state = orchestration.read_state()
    done = local_service.prefect("server", "stop")
    orchestration.state_path().unlink(missing_ok=True)
    if done.returncode != 0:
        fail(f"prefect server stop: {local_service.last_line(done)}")
    if state is not None:
        deadline = time.monotonic() + 30
        while orchestration.healthy(state.api_url) and time.monotonic() < deadline:
            time.sleep(0.3)
    out.print(local_service.last_line(done), highlight=False)
