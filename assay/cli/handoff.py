"""Commands handed to the local service's warm command process, so that a command costs a fork of a
process that has already imported the command line, not a Python start-up that imports it.

`assay server start` starts, beside the Assay service, a *command process*
(`python -m assay.cli.handoff SOCKET SERVICE_URL`): it imports the command line and every module
a command needs to talk to the service (never Prefect), then waits on a Unix socket that only its
user can reach. The `assay` script (`assay.cli.main`) connects before it imports anything heavy
and sends its command line, working folder, environment, umask and its standard input, output and
error themselves (file descriptors, `SCM_RIGHTS`); the command process forks, and the child
becomes that command — in the caller's folder, with the caller's environment, writing straight to
the caller's terminal or pipe — and runs the same code `assay` runs in its own process. The
command process tells the caller the child's pid (the caller forwards Ctrl-C and termination to
it) and, once the child has ended, its exit status, which becomes the caller's.

What a command does and prints is therefore the same either way: only where its imports were
paid differs. A command is handed over only when a command process answers at this `PREFECT_HOME`
and runs the same interpreter and the same Assay installation, and never with `--local`,
`ASSAY_LOCAL=1`, or for `assay server …` and `assay serve` (which start and stop these
processes); otherwise, and when the command process refuses, it runs in the caller as before.
The command process ends when the service it was started beside no longer accepts connections (it
looks once a second), or on SIGTERM, once the commands it is running have ended.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import hashlib
import json
import os
import signal
import socket
import stat
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

SUPPORTED = hasattr(socket, "send_fds") and hasattr(os, "fork")
"""Handing over needs Unix sockets that carry file descriptors, and fork (not on Windows, where
every command runs in its own process)."""
NOT_HANDED = ("server", "serve")
"""Commands that start or stop the command process itself: they always run in the caller."""
LOCAL_FLAG = "--local"
LOCAL_ENV = "ASSAY_LOCAL"
"""`1`: every command runs in this process, the local service or not (as `--local` does)."""
STREAMS = 3
_LENGTH = struct.Struct("!Q")
_NUMBER = struct.Struct("!q")
FORWARDED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RECEIVE_TIMEOUT_SECONDS = 10.0
WATCH_SECONDS = 1.0
LOST_STATUS = 1


def prefect_home() -> Path:
    """Where the local servers keep their state (`PREFECT_HOME`, else `~/.prefect`)."""
    return Path(os.environ.get("PREFECT_HOME") or "~/.prefect").expanduser()


def socket_path() -> Path:
    """The command process's socket for this `PREFECT_HOME`: in a folder of the user's own under
    the temporary folder (a Unix socket's path may not exceed ~100 bytes, which a
    `PREFECT_HOME`'s may), named after the home's absolute path."""
    home = os.path.abspath(prefect_home())
    name = hashlib.sha256(home.encode()).hexdigest()[:24]
    return Path(tempfile.gettempdir()) / f"assay-{os.getuid()}" / f"{name}.sock"


def local_forced() -> bool:
    """Whether `ASSAY_LOCAL` says every command runs in its own process."""
    return os.environ.get(LOCAL_ENV, "") not in ("", "0")


def _installation() -> dict[str, str]:
    """What must match for a command to be handed over: the interpreter and the Assay package."""
    import assay

    return {"executable": sys.executable, "assay": os.path.dirname(assay.__file__)}


# ---------------------------------------------------------------- the caller (`assay`)


def hand_over(argv: list[str]) -> int | None:
    """Run `argv` in the local command process: its exit status, or None when it is not handed
    over (no command process here, another installation, `--local`, …) and must run here."""
    if not SUPPORTED or (len(argv) > 1 and argv[1] in NOT_HANDED):
        return None
    if LOCAL_FLAG in argv or local_forced():
        return None
    streams = _streams()
    if streams is None:
        return None
    path = socket_path()
    if not _ours(path):
        return None
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(path))
    except OSError:
        connection.close()
        return None
    with connection:
        request = json.dumps(
            {
                **_installation(),
                "argv": argv,
                "path": sys.path,
                "main_package": getattr(sys.modules["__main__"], "__package__", None),
                "cwd": os.getcwd(),
                "env": dict(os.environ),
                "umask": _umask(),
                "streams": streams,
            }
        ).encode()
        try:
            socket.send_fds(connection, [_LENGTH.pack(len(request))], list(range(STREAMS)))
            connection.sendall(request)
            child = _read_number(connection)
        except OSError:
            return None
        if child is None:  # refused before anything ran
            return None
        return _wait_for(connection, child)


def _ours(path: Path) -> bool:
    """Whether `path` and its folder are this user's and nobody else may write in that folder:
    a socket another user put there would be sent this user's environment and streams."""
    try:
        folder, item = os.lstat(path.parent), os.lstat(path)
    except OSError:
        return False
    uid = os.getuid()
    private = stat.S_ISDIR(folder.st_mode) and not folder.st_mode & 0o077
    return private and folder.st_uid == uid and item.st_uid == uid


def _streams() -> list[dict[str, Any]] | None:
    """How this process's standard streams are set up (the child sets up its own alike), or
    None when one is closed (nothing to hand over)."""
    described = []
    for descriptor, stream in enumerate((sys.stdin, sys.stdout, sys.stderr)):
        try:
            os.fstat(descriptor)
        except OSError:
            return None
        if stream is None:
            return None
        described.append(
            {
                "encoding": stream.encoding,
                "errors": stream.errors,
                "line_buffering": stream.line_buffering,
                "write_through": getattr(stream, "write_through", False),
            }
        )
    return described


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _read_number(connection: socket.socket) -> int | None:
    data = b""
    while len(data) < _NUMBER.size:
        chunk = connection.recv(_NUMBER.size - len(data))
        if not chunk:
            return None
        data += chunk
    number: int = _NUMBER.unpack(data)[0]
    return number


def _wait_for(connection: socket.socket, child: int) -> int:
    """The child's exit status, forwarding Ctrl-C and termination to it meanwhile, and Ctrl-Z:
    the command is stopped with its caller and continues with it (`fg`)."""

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signum)

    def suspend(_signum: int, _frame: object) -> None:
        forward(signal.SIGSTOP, None)
        os.kill(os.getpid(), signal.SIGSTOP)  # stops here until continued
        forward(signal.SIGCONT, None)

    for forwarded in FORWARDED_SIGNALS:
        signal.signal(forwarded, forward)
    signal.signal(signal.SIGTSTP, suspend)
    status = _read_number(connection)
    if status is None:
        print(
            "assay: the local command process ended before the command did "
            "(`assay server stop`?); run it again",
            file=sys.stderr,
        )
        return LOST_STATUS
    return status


# ---------------------------------------------------------------- the command process


def become(request: dict[str, Any]) -> None:
    """In the child forked for a caller's `request`: take on its folder, environment, umask,
    streams, import path and command line. (The command process ran no command: it remembers
    nothing `assay.process_state` would forget.)"""
    from assay.cli import _common

    os.chdir(request["cwd"])
    os.umask(request["umask"])
    os.environ.clear()
    os.environ.update(request["env"])
    if hasattr(time, "tzset"):
        time.tzset()
    sys.argv = list(request["argv"])
    sys.path[:] = request["path"]  # what the command imports lazily, found as there
    # How `assay`'s usage lines name the program (click reads `__main__.__package__`).
    sys.modules["__main__"].__package__ = request["main_package"]
    _standard_streams(request["streams"])
    _common.fresh_consoles()


def _standard_streams(streams: list[dict[str, Any]]) -> None:
    opened = []
    for descriptor, setup in enumerate(streams):
        stream = open(  # noqa: SIM115 - the process's standard stream, open until it ends
            descriptor,
            "r" if descriptor == 0 else "w",
            encoding=setup["encoding"],
            errors=setup["errors"],
            closefd=False,
        )
        stream.reconfigure(
            line_buffering=setup["line_buffering"], write_through=setup["write_through"]
        )
        opened.append(stream)
    sys.stdin, sys.stdout, sys.stderr = opened


def _exit_status(wait_status: int) -> int:
    """As a shell reports it: the exit code, or 128 + the signal that ended the process."""
    code = os.waitstatus_to_exitcode(wait_status)
    return code if code >= 0 else 128 - code


class CommandProcess:
    """The loop of the command process: accept a caller, fork a child for its command, tell the
    caller the child's pid and later its exit status; end when the watched service ends."""

    def __init__(self, path: Path, watched: str) -> None:
        self.path = path
        self.watched = watched
        self.own_pid = os.getpid()
        self.installation = _installation()
        self.callers: dict[int, socket.socket] = {}
        self.stopping = False
        self.listener = self._listen()
        self.wakeup_reader, wakeup_writer = socket.socketpair()
        self.wakeup_reader.setblocking(False)
        wakeup_writer.setblocking(False)
        self._wakeup_writer = wakeup_writer
        signal.set_wakeup_fd(wakeup_writer.fileno())
        signal.signal(signal.SIGCHLD, self._noted)
        signal.signal(signal.SIGTERM, self._stop)

    def _listen(self) -> socket.socket:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder = os.lstat(self.path.parent)
        if not stat.S_ISDIR(folder.st_mode) or folder.st_uid != os.getuid():
            raise PermissionError(f"{self.path.parent} is not this user's own folder")
        os.chmod(self.path.parent, 0o700)
        self.path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_mask = os.umask(0o177)  # the socket is created 0600: the user's alone
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old_mask)
        listener.listen(64)
        self.inode = self.path.stat().st_ino
        return listener

    def _noted(self, _signum: int, _frame: object) -> None:
        """SIGCHLD: the wake-up descriptor has been written; the loop reaps."""

    def _stop(self, _signum: int, _frame: object) -> None:
        """SIGTERM (`assay server stop`): accept no more commands; the running ones end as they
        would, each caller told its status, and then this process."""
        self.stopping = True

    def _stop_listening(self, selector: Any) -> None:
        """Close the socket and remove its path — unless a newer command process (started by
        the next `assay server start`) has bound that path since."""
        if self.listener.fileno() < 0:
            return
        selector.unregister(self.listener)
        self.listener.close()
        with contextlib.suppress(OSError):
            if self.path.stat().st_ino == self.inode:
                self.path.unlink()

    def serve(self) -> dict[str, Any] | None:
        """Run until the service ends or SIGTERM and no command runs (None); in a forked child,
        return the caller's request it is to `become`."""
        import selectors

        from assay.cli import local_service  # imported by then (`warm_up`): it imports this

        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(self.wakeup_reader, selectors.EVENT_READ)
        next_look = 0.0
        try:
            while not (self.stopping and not self.callers):
                if not self.stopping and time.monotonic() >= next_look:
                    next_look = time.monotonic() + WATCH_SECONDS
                    self.stopping = not local_service.answers(self.watched)
                if self.stopping:
                    self._stop_listening(selector)
                for key, _ in selector.select(WATCH_SECONDS):
                    if key.fileobj is self.listener:
                        handed = self._accept(selector)
                        if handed is not None:
                            return handed
                    elif key.fileobj is self.wakeup_reader:
                        self._drain_wakeups()
                    else:
                        self._caller_spoke(selector, key.data)
                self._reap(selector)
            return None
        finally:
            if os.getpid() == self.own_pid:
                self._stop_listening(selector)

    def _accept(self, selector: Any) -> dict[str, Any] | None:
        import selectors

        connection, _ = self.listener.accept()
        try:
            connection.settimeout(RECEIVE_TIMEOUT_SECONDS)
            request, descriptors = _receive(connection)
        except (OSError, ValueError):
            connection.close()
            return None
        if not _same_user(connection) or any(
            request.get(key) != value for key, value in self.installation.items()
        ):
            _close_all(descriptors)
            connection.close()  # the caller runs the command itself
            return None
        try:
            child = os.fork()
        except OSError:  # no process to spare: the caller runs the command itself
            _close_all(descriptors)
            connection.close()
            return None
        if child == 0:
            self._become_child(selector, descriptors)
            connection.close()
            return request
        _close_all(descriptors)
        try:
            connection.sendall(_NUMBER.pack(child))
        except OSError:
            os.kill(child, signal.SIGINT)  # the caller is gone already
        self.callers[child] = connection
        selector.register(connection, selectors.EVENT_READ, data=child)
        return None

    def _become_child(self, selector: Any, descriptors: list[int]) -> None:
        """In the forked child: none of the loop's sockets or signal handlers, and the caller's
        streams as 0, 1 and 2."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        selector.close()
        for caller in self.callers.values():
            caller.close()
        self.listener.close()
        self.wakeup_reader.close()
        self._wakeup_writer.close()
        for target, descriptor in enumerate(descriptors):
            os.dup2(descriptor, target)
        _close_all(descriptors)

    def _drain_wakeups(self) -> None:
        try:
            while self.wakeup_reader.recv(4096):
                pass
        except BlockingIOError:
            pass

    def _caller_spoke(self, selector: Any, child: int) -> None:
        """A caller's connection became readable: it never sends after its request, so it has
        gone (killed): its command is interrupted as Ctrl-C would."""
        connection = self.callers.get(child)
        if connection is None:
            return
        try:
            gone = not connection.recv(1)
        except OSError:
            gone = True
        if gone:
            selector.unregister(connection)
            connection.close()
            del self.callers[child]
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGINT)

    def _reap(self, selector: Any) -> None:
        while True:
            try:
                child, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if child == 0:
                return
            connection = self.callers.pop(child, None)
            if connection is None:
                continue
            selector.unregister(connection)
            with contextlib.suppress(OSError):
                connection.sendall(_NUMBER.pack(_exit_status(wait_status)))
            connection.close()


def _receive(connection: socket.socket) -> tuple[dict[str, Any], list[int]]:
    header, descriptors, _, _ = socket.recv_fds(connection, _LENGTH.size, STREAMS)
    if len(header) != _LENGTH.size or len(descriptors) != STREAMS:
        _close_all(descriptors)
        raise ValueError("a caller sent no streams")
    (length,) = _LENGTH.unpack(header)
    body = bytearray()
    while len(body) < length:
        chunk = connection.recv(min(length - len(body), 1 << 20))
        if not chunk:
            _close_all(descriptors)
            raise ValueError("a caller left before its request ended")
        body += chunk
    request = json.loads(body)
    if not isinstance(request, dict):
        _close_all(descriptors)
        raise ValueError("a caller's request is not an object")
    return request, descriptors


def _same_user(connection: socket.socket) -> bool:
    """Whether the caller runs as this process's user (the socket is 0600 in a 0700 folder too;
    this holds where the platform says who is calling)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    credentials = connection.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")
    )
    _pid, uid, _gid = struct.unpack("3i", credentials)
    return bool(uid == os.getuid())


def _close_all(descriptors: list[int]) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def warm_up() -> Callable[[], object]:
    """Import what a command that talks to the service imports — the command line with every
    command, a service client and the models its answers become; never Prefect: a command that
    runs flows imports it in its child, with the caller's environment — and build the command
    line's command (what `app()` builds at every call: with every command imported, ~25 ms)."""
    import importlib

    import typer

    from assay.cli import _common, remote
    from assay.cli._commands import COMMANDS
    from assay.client import AssayClient

    for module in dict.fromkeys(listed.module for listed in COMMANDS.values()):
        importlib.import_module(f"assay.cli.{module}")
    for module in remote.ANSWER_MODULES:
        importlib.import_module(module)
    AssayClient("http://127.0.0.1:1").close()  # its HTTP transport's modules load on first use
    built: Callable[[], object] = typer.main.get_command(_common.app)
    return built


def main(argv: list[str]) -> NoReturn:
    """`python -m assay.cli.handoff SOCKET SERVICE_URL`: the command process."""
    path, watched = Path(argv[1]), argv[2]
    command_line = warm_up()
    # The imported modules are shared with every child until written to; the collector then
    # need not walk (and so copy) them in each.
    gc.freeze()
    handed = CommandProcess(path, watched).serve()
    if handed is None:
        raise SystemExit(0)
    become(handed)
    from assay.cli import run_here

    try:
        run_here(command_line)
    except SystemExit as ended:
        others = [
            thread for thread in threading.enumerate() if thread is not threading.main_thread()
        ]
        if all(thread.daemon for thread in others):
            _end_now(ended.code)
        raise
    raise SystemExit(0)


def _end_now(code: object) -> NoReturn:
    """End the command's child as the interpreter would end it — the exit handlers run, the
    streams flushed, the same status — but without tearing down every module the command
    process imported one by one (~30 ms, nothing a command needs: what must happen at exit is
    an exit handler). Only with no thread left that the interpreter would wait for."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(status)


if __name__ == "__main__":
    main(sys.argv)
