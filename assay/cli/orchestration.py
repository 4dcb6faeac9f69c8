"""Which Prefect API the CLI's flows run against, and what the terminal shows of them.

Order: a `PREFECT_API_URL` in the environment wins; else the lasting local server that
`assay server start` recorded under `PREFECT_HOME`, when it answers its health check; else
Prefect's ephemeral API (started in this process, gone when the command ends — fine for CI).
Nothing here imports Prefect until a flow is about to run, so bad input is answered at once.
A configured API that does not answer at all is one line and exit 2 before any flow starts
(`connect`), not Prefect's traceback after its own retries.
"""

from __future__ import annotations

import logging
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from pydantic import BaseModel

from assay.cli import handoff

SERVER_STATE_FILE = "assay-server.json"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 4200
HEALTH_TIMEOUT_SECONDS = 1.0
REACH_TIMEOUT_SECONDS = 5.0
"""How long a configured API has to answer before a command says it cannot reach it."""

_debug = False
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")
"""Prefect's loggers for flow and task runs: what they log also goes to the run's Logs tab."""
API_SENDERS = ("prefect.events.clients", "prefect._internal.concurrency")
"""Prefect's background senders of events and logs: what they log is about reaching the API
(`Unable to connect to …`, `Service 'EventsWorker' failed to process item …`)."""


class ServerState(BaseModel):
    """The lasting local server that `assay server start` launched."""

    host: str
    port: int
    pid: int | None = None

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.ui_url}/api"


DRAINING = "Still processing items"
"""How Prefect's event and log workers begin the warning they log while the process's exit waits
for their queues: progress, not a problem."""


def shown_in_terminal(record: logging.LogRecord) -> bool:
    """Whether the terminal shows `record`. Never Prefect's progress while it sends the last
    events at exit (not even with --debug): how many are left depends only on how soon the
    command ended, and it would follow the command's one-line error. With --debug, everything
    else. Else not a failing flow or task run's ERROR (and traceback): it is kept for the run's
    Logs tab in the Prefect API, and the command ends with one line saying what failed; and not
    what Prefect's background senders say while its API does not answer (a line every few
    seconds per event): the command ends with one line saying so."""
    if record.getMessage().startswith(DRAINING):
        return False
    if _debug:
        return True
    if record.levelno >= logging.ERROR and record.name in RUN_LOGGERS:
        return False
    return record.name not in API_SENDERS


def state_path() -> Path:
    return handoff.prefect_home() / SERVER_STATE_FILE


def read_state() -> ServerState | None:
    try:
        return ServerState.model_validate_json(state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_state(state: ServerState) -> None:
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(state.model_dump_json(), encoding="utf-8")


def healthy(api_url: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> bool:
    """Whether a Prefect API answers `GET /health` at `api_url`."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout) as reply:
            return bool(reply.status == 200)
    except (OSError, ValueError):
        return False


def reachable(api_url: str, timeout: float = REACH_TIMEOUT_SECONDS) -> bool:
    """Whether anything answers HTTP at the Prefect API `api_url` (any status: a server that
    wants a key is there; the flow's own calls say what is wrong with it)."""
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=timeout):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def unreachable(api_url: str) -> str:
    """The one line for a Prefect API that does not answer."""
    return (
        f"cannot reach the Prefect API at {api_url}: start it with assay server start "
        "(or unset PREFECT_API_URL for a temporary API)"
    )


def running_server() -> ServerState | None:
    """The recorded lasting server, if it is up."""
    state = read_state()
    return state if state is not None and healthy(state.api_url) else None


def connect(*, verbose: bool = False, debug: bool = False, must_answer: bool = True) -> str | None:
    """Point Prefect at a server (see the module docs) and keep the terminal quiet: `verbose`
    (`assay -v`) shows Prefect's log lines (INFO and up) too, `debug` (`assay --debug`) also the
    errors and tracebacks of failing flow and task runs, and what Prefect writes when it cannot
    send its logs to the API.

    Returns the API URL runs go to, or None when they use an ephemeral API. With `must_answer`,
    a configured API that does not answer (`reachable`) exits 2 with one line (`unreachable`);
    `assay serve` starts without it (its `/healthz` and 503s say the API is down, and it serves
    reads meanwhile).
    """
    global _debug
    _debug = debug
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    # The ephemeral API migrates a fresh SQLite database on first use; Prefect's 20 s default
    # times out on a busy 2-core machine (see ../shared/PREFECT-NOTES.md).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")
    if "prefect" not in sys.modules and not os.environ.get("PREFECT_API_URL"):
        server = running_server()
        if server is not None:
            os.environ["PREFECT_API_URL"] = server.api_url
    import prefect.main  # noqa: F401 - configures Prefect's logging, which is adjusted below
    from prefect.logging.handlers import PrefectConsoleHandler
    from prefect.settings import PREFECT_API_URL

    # Run logs go to the API at INFO (the run's Logs tab); the terminal shows warnings and
    # errors only, unless -v, and not the failures of runs, unless --debug.
    console_level = logging.INFO if verbose else logging.WARNING
    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler):
            handler.setLevel(console_level)
            handler.addFilter(shown_in_terminal)
    for handler in logging.getLogger("prefect._internal").handlers:  # its own, on stderr
        handler.addFilter(shown_in_terminal)
    # Prefect's log sender writes `--- Error logging to API ---` straight to stderr for every
    # batch it cannot send, unless Python's logging is told not to report handler errors.
    logging.raiseExceptions = debug
    api = PREFECT_API_URL.value()
    if api and must_answer and not reachable(str(api)):
        from assay.cli._common import fail

        fail(unreachable(str(api)))
    return str(api) if api else None


def ui_link(flow_run_id: object) -> str | None:
    """The run's page in the Prefect UI, or None on an ephemeral API (there is no UI)."""
    from prefect.settings import PREFECT_UI_URL

    ui = PREFECT_UI_URL.value()
    return f"{str(ui).rstrip('/')}/runs/flow-run/{flow_run_id}" if ui else None
