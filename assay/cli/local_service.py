"""The lasting local Assay service: `assay server start` runs `assay serve` on loopback beside
Prefect's server, and every command that can goes through it while it is up — a run then costs
a request, not a Python process that imports Prefect and starts flows.

It holds a credential of its own (`ASSAY_LOCAL_TOKEN` in its environment, never on a command
line), kept for the user in `assay-service.json` under `PREFECT_HOME`, readable by the user only
(0600). A caller holding it is the machine's user: it names outputs by local path (nothing is
copied over HTTP) and is audited as `local`. A command uses the service only for the store the
service keeps (`--store`, `$ASSAY_STORE`, else `file://.assay`, compared as absolute URIs) and
only with options the service takes; anything else runs in this process as before, and so does
every command with `--local` or `ASSAY_LOCAL=1`.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

from pydantic import BaseModel

from assay.cli import handoff, orchestration
from assay.cli.orchestration import ServerState

log = logging.getLogger("assay.cli")
PREFECT_PID_FILE = "server.pid"

LOCAL_TOKEN_ENV = "ASSAY_LOCAL_TOKEN"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
STATE_FILE = "assay-service.json"
LOG_FILE = "assay-service.log"
DEFAULT_PORT = 8765
HEALTH_TIMEOUT_SECONDS = 1.0


class NotStartedError(RuntimeError):
    """A local server did not start (the message is the one line to show)."""


class LocalService(BaseModel):
    """The lasting local service `assay server start` launched."""

    url: str
    token: str
    store: str
    """The store it keeps, as an absolute URI (`canonical_store`)."""
    pid: int
    prefect_api: str
    commands_pid: int | None = None
    """The warm command process beside it (`assay.cli.handoff`), when it started."""


def canonical_store(store: str | None) -> str:
    """The store a command names (`--store`, else `$ASSAY_STORE`, else `file://.assay`) as one
    URI, so that the same store named from two folders compares equal (an unknown scheme: as
    given, and the command's own run says what is wrong with it)."""
    from assay import schemes
    from assay.schemes.base import UnknownSchemeError

    try:
        return schemes.canonical_store(store)
    except UnknownSchemeError:
        return store or ""


def state_path() -> Path:
    return handoff.prefect_home() / STATE_FILE


def log_path() -> Path:
    return handoff.prefect_home() / LOG_FILE


def read_state() -> LocalService | None:
    try:
        return LocalService.model_validate_json(state_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _write_state(service: LocalService) -> None:
    path = state_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(service.model_dump_json())


def answers(url: str, timeout: float = HEALTH_TIMEOUT_SECONDS) -> bool:
    """Whether something listens at the service's address: a connection, not `/healthz`, whose
    store and Prefect probes cost ~0.2 s of every command (a service that cannot run a command
    says so in the command's answer)."""
    address = urllib.parse.urlsplit(url)
    try:
        with socket.create_connection((address.hostname, address.port), timeout=timeout):
            return True
    except OSError:
        return False


def running() -> LocalService | None:
    """The recorded local service, if it answers."""
    state = read_state()
    return state if state is not None and answers(state.url) else None


def for_store(store: str | None) -> LocalService | None:
    """The local service a command on `store` goes through: up, keeping that store, and not
    turned off (`ASSAY_LOCAL=1`)."""
    if handoff.local_forced():
        return None
    state = read_state()
    if state is None or state.store != canonical_store(store):
        return None
    return state if answers(state.url) else None


def _free_port(preferred: int) -> int:
    for port in (preferred, 0):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            chosen: int = probe.getsockname()[1]
            return chosen
    raise OSError("no free loopback port")


def prefect(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    prefect = Path(sys.executable).with_name("prefect")
    command = [str(prefect)] if prefect.exists() else [sys.executable, "-m", "prefect"]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, env=env, check=False, timeout=120
    )


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"


def _prefect_pid() -> int | None:
    try:
        return int((handoff.prefect_home() / PREFECT_PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def start_prefect(host: str, port: int, timeout: float) -> ServerState:
    """Start Prefect's server in the background and register Assay's block types there."""
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
    done = prefect("server", "start", "--background", "--host", host, "--port", str(port), env=env)
    if done.returncode != 0:
        raise NotStartedError(f"prefect server start: {last_line(done)}")
    deadline = time.monotonic() + timeout
    while not orchestration.healthy(state.api_url):
        if time.monotonic() > deadline:
            raise NotStartedError(
                f"the Prefect server did not answer at {state.api_url} within {timeout:.0f} s"
            )
        time.sleep(0.5)
    orchestration.write_state(state.model_copy(update={"pid": _prefect_pid()}))
    # Registered so that the UI's Blocks page can create an EvidenceStorage, a FinOpsBudget, …
    registered = prefect(
        "block", "register", "-m", "blocks", env={**env, "PREFECT_API_URL": state.api_url}
    )
    if registered.returncode != 0:
        log.warning("Assay's block types were not registered: %s", last_line(registered))
    return state


def start(store: str | None, prefect_api: str, port: int, timeout: float) -> LocalService:
    """Start `assay serve` on loopback in the background, on `prefect_api`, keeping `store`;
    return it once it answers. NotStartedError, one line, when it does not within `timeout`."""
    token = secrets.token_urlsafe(32)
    chosen = _free_port(port)
    url = f"http://127.0.0.1:{chosen}"
    env = {**os.environ, "PREFECT_API_URL": prefect_api, LOCAL_TOKEN_ENV: token}
    env.pop("ASSAY_URL", None)
    uri = canonical_store(store)
    log = log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "assay.cli", "serve", "--port", str(chosen), "--store", uri],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,  # outlives this command and its terminal's signals
        )
    deadline = time.monotonic() + timeout
    while not answers(url):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise NotStartedError(f"the Assay service did not start at {url}; its log: {log}")
        time.sleep(0.2)
    service = LocalService(
        url=url,
        token=token,
        store=uri,
        pid=process.pid,
        prefect_api=prefect_api,
        commands_pid=_start_command_process(url, deadline),
    )
    _write_state(service)
    return service


def _start_command_process(service_url: str, deadline: float) -> int | None:
    """Start the warm command process beside the service (`assay.cli.handoff`): its pid once it
    accepts commands; None (logged) when it does not by `deadline` — commands then run in their
    own processes, as with `--local`, and still go through the service."""
    if not handoff.SUPPORTED:
        return None
    path = handoff.socket_path()
    with log_path().open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "assay.cli.handoff", str(path), service_url],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            start_new_session=True,
        )
    while not _accepts(path):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            log.warning("the command process did not start; its log: %s", log_path())
            return None
        time.sleep(0.05)
    return process.pid


def _accepts(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


def may_start() -> bool:
    """Whether a command may start the local servers for its user: a person at a terminal, not
    CI (`CI` set) and not `ASSAY_LOCAL=1` — a process it started would outlive a CI job."""
    if os.environ.get("CI") or handoff.local_forced():
        return False
    return sys.stdin.isatty() and sys.stdout.isatty()


def start_for_user(store: str | None, timeout: float = 240.0) -> LocalService:
    """Start what is not running of the local servers (the Prefect API `PREFECT_API_URL` names
    is used as it is) and the Assay service on `store`."""
    prefect_api = os.environ.get("PREFECT_API_URL")
    if not prefect_api:
        running_prefect = orchestration.running_server() or start_prefect(
            orchestration.DEFAULT_HOST, orchestration.DEFAULT_PORT, timeout
        )
        prefect_api = running_prefect.api_url
    stale = read_state()
    if stale is not None and answers(stale.url):
        stop()  # up on another store: this command's store is the one asked for
    return start(store, prefect_api, DEFAULT_PORT, timeout)


def stop() -> LocalService | None:
    """Stop the recorded local service (SIGTERM, then SIGKILL after 10 s) and its command
    process; the one stopped."""
    state = read_state()
    state_path().unlink(missing_ok=True)
    if state is None or not answers(state.url):  # gone: its pid may be another process's now
        return None
    if state.commands_pid is not None and alive(state.commands_pid):
        # It stops accepting at once and ends once the commands it runs have (never killed: one
        # of them may be the command that stops it).
        os.kill(state.commands_pid, signal.SIGTERM)
    os.kill(state.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(state.pid):
        time.sleep(0.1)
    if alive(state.pid):
        os.kill(state.pid, signal.SIGKILL)
    return state


def alive(pid: int) -> bool:
    """Whether `pid` still runs (reaped here when it is this process's child)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
