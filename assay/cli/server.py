"""`assay server start|status|stop`: a lasting local Prefect server, with its UI, between commands.

It is Prefect's own server (`prefect server start --background`), not one of ours; its PID file and
database live under `PREFECT_HOME`, and `assay-server.json` beside them records where it listens,
so that every later command (see `assay.cli.orchestration`) sends its runs there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

from assay.cli import orchestration
from assay.cli._common import JsonOption, app, fail, out, print_json
from assay.cli.orchestration import DEFAULT_HOST, DEFAULT_PORT, ServerState

server_app = typer.Typer(
    help="Keep a local Prefect server (API and UI) running between commands.",
    no_args_is_help=True,
)
app.add_typer(server_app, name="server")

EXIT_NOT_RUNNING = 1
PREFECT_PID_FILE = "server.pid"


def _prefect(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    prefect = Path(sys.executable).with_name("prefect")
    command = [str(prefect)] if prefect.exists() else [sys.executable, "-m", "prefect"]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, check=False, timeout=120
    )


def _last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


def _pid() -> int | None:
    try:
        return int((orchestration.prefect_home() / PREFECT_PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


@server_app.command("start")
def server_start(
    port: Annotated[int, typer.Option("--port", help="Port of the API and UI.")] = DEFAULT_PORT,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = DEFAULT_HOST,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the server to answer.")
    ] = 180.0,
) -> None:
    """Start Prefect's server in the background; every assay command then uses it."""
    running = orchestration.running_server()
    if running is not None:
        out.print(f"Already running: Prefect UI at {running.ui_url}", highlight=False)
        return
    state = ServerState(host=host, port=port)
    env = {
        **os.environ,
        "PREFECT_SERVER_ANALYTICS_ENABLED": os.environ.get(
            "PREFECT_SERVER_ANALYTICS_ENABLED", "false"
        ),
        # On any port but 4200 the UI must be told where its API is (PREFECT-NOTES).
        "PREFECT_UI_API_URL": state.api_url,
    }
    env.pop("PREFECT_API_URL", None)
    done = _prefect("server", "start", "--background", "--host", host, "--port", str(port), env=env)
    if done.returncode != 0:
        fail(f"prefect server start: {_last_line(done)}")
    deadline = time.monotonic() + timeout
    while not orchestration.healthy(state.api_url):
        if time.monotonic() > deadline:
            fail(f"the Prefect server did not answer at {state.api_url} within {timeout:.0f} s")
        time.sleep(0.5)
    orchestration.write_state(state.model_copy(update={"pid": _pid()}))
    # Registered so that the UI's Blocks page can create an EvidenceStorage, a FinOpsBudget, …
    registered = _prefect(
        "block", "register", "-m", "blocks", env={**env, "PREFECT_API_URL": state.api_url}
    )
    if registered.returncode != 0:
        out.print(
            f"warning: Assay's block types were not registered: {_last_line(registered)}",
            highlight=False,
        )
    out.print(
        f"Prefect server up: UI at {state.ui_url}, API at {state.api_url}.\n"
        "Every assay command now runs its flows there and prints each run's link; "
        "`assay server stop` stops it.",
        highlight=False,
    )


@server_app.command("status")
def server_status(as_json: JsonOption = False) -> None:
    """Say whether the lasting server is up (exit 0) or not (exit 1)."""
    state = orchestration.read_state()
    up = state is not None and orchestration.healthy(state.api_url)
    if as_json:
        print_json(
            {
                "running": up,
                "ui_url": state.ui_url if state else None,
                "api_url": state.api_url if state else None,
                "pid": state.pid if state else None,
            }
        )
    elif up and state is not None:
        out.print(f"running: Prefect UI at {state.ui_url} (pid {state.pid})", highlight=False)
    else:
        out.print("not running: `assay server start` starts it", highlight=False)
    raise typer.Exit(0 if up else EXIT_NOT_RUNNING)


@server_app.command("stop")
def server_stop() -> None:
    """Stop the lasting server (runs stay in its database for the next start)."""
    state = orchestration.read_state()
    done = _prefect("server", "stop")
    orchestration.state_path().unlink(missing_ok=True)
    if done.returncode != 0:
        fail(f"prefect server stop: {_last_line(done)}")
    if state is not None:
        deadline = time.monotonic() + 30
        while orchestration.healthy(state.api_url) and time.monotonic() < deadline:
            time.sleep(0.3)
    out.print(_last_line(done), highlight=False)
