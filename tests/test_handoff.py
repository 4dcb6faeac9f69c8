"""Commands handed to the local service's warm command process (`assay.cli.handoff`): a real
`assay server start` service and command process, real `assay` processes (a pseudo-terminal
with pexpect where a person would type). A handed command reads and writes the caller's own
streams in the caller's folder and environment, so every byte, exit status and prompt is what
the same command run in its own process (`ASSAY_LOCAL=1`) gives; the caller imports no Typer
(`-X importtime` on the caller says what it imported)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pexpect

from assay.cli import handoff, local_service
from tests.conftest import EXAMPLES
from tests.servers import free_port

# The lasting local service on its own PREFECT_HOME and store (a fixture, imported to be used).
from tests.test_local_service import local as local

SUITE = str(EXAMPLES / "support-suite.yaml")
V1 = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")
Local = tuple[local_service.LocalService, dict[str, str]]
PROMPT = r"label (\x1b\[[0-9;]*m)*\[p/f/s/q\]"
POWER = ("suite", "power", SUITE, "--baseline-rate", "0.9")
"""A command that reads the suite file and needs no service: it runs the same either way."""


def _assay(
    *args: str, env: dict[str, str], cwd: Path | None = None, python: str = sys.executable
) -> tuple[subprocess.CompletedProcess[str], bool]:
    """`python -m assay.cli ARGS` with its output, and whether it was handed over (the caller
    imported no Typer: `-X importtime` lines, taken out of stderr)."""
    ran = subprocess.run(
        [python, "-X", "importtime", "-m", "assay.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=300,
    )
    lines = ran.stderr.splitlines(keepends=True)
    imported = [line for line in lines if line.startswith("import time:")]
    ran.stderr = "".join(line for line in lines if not line.startswith("import time:"))
    return ran, not any(line.rstrip().endswith(" typer") for line in imported)


def _here(env: dict[str, str]) -> dict[str, str]:
    return {**env, "ASSAY_LOCAL": "1"}


def test_usage_errors_bad_input_and_relative_paths_read_the_same_handed_or_not(
    local: Local, tmp_path: Path
) -> None:
    _, env = local
    (tmp_path / "suite.yaml").write_text(Path(SUITE).read_text(encoding="utf-8"))
    commands = [
        ("run",),  # a usage error: the usage line names `python -m assay.cli`
        ("run", "no-such-suite.yaml", "--outputs", "nothing.jsonl"),
        ("suite", "power", "suite.yaml", "--baseline-rate", "0.9"),  # relative to the folder
        ("gate", "--help"),
    ]
    for command in commands:
        handed, was_handed = _assay(*command, env=env, cwd=tmp_path)
        here, was_here = _assay(*command, env=_here(env), cwd=tmp_path)
        assert was_handed and not was_here, command
        assert (handed.returncode, handed.stdout, handed.stderr) == (
            here.returncode,
            here.stdout,
            here.stderr,
        ), command
    assert "(python -m assay.cli run --help)" in _assay("run", env=env)[0].stderr


def test_a_handed_command_reads_the_callers_input(local: Local, tmp_path: Path) -> None:
    _, env = local
    into = tmp_path / "set.jsonl"
    label = ["label", SUITE, "--outputs", V1, "--into", str(into), "--labeler", "ana"]
    ran = subprocess.run(
        [sys.executable, "-m", "assay.cli", *label],
        input="p\nf\nq\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert "Labelled 2 item(s); the set holds 2" in ran.stdout
    assert len(into.read_text(encoding="utf-8").splitlines()) == 2


def _in_a_terminal(args: list[str], env: dict[str, str]) -> pexpect.spawn:
    return pexpect.spawn(
        sys.executable,
        ["-m", "assay.cli", *args],
        env={**env, "TERM": "xterm-256color"},
        encoding="utf-8",
        timeout=120,
        dimensions=(40, 111),
    )


def _labelling(into: Path, env: dict[str, str]) -> pexpect.spawn:
    """`assay label` at a terminal, waiting at its first prompt."""
    session = _in_a_terminal(
        ["label", SUITE, "--outputs", V1, "--into", str(into), "--labeler", "ana"], env
    )
    session.expect(PROMPT)
    return session


def _until(condition: Callable[[], bool], seconds: float = 10) -> bool:
    """Whether `condition` holds within `seconds` (asked every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_handed_command_writes_to_the_callers_terminal_as_one_run_here(local: Local) -> None:
    _, env = local
    env = {k: v for k, v in env.items() if k != "COLUMNS"}  # the terminal says how wide
    _assay("run", SUITE, "--outputs", V1, "--json", env=env)
    shown = []
    for environment in (env, _here(env)):
        session = _in_a_terminal(["runs", "list"], environment)
        session.expect(pexpect.EOF)
        session.close()
        assert session.exitstatus == 0, session.before
        shown.append(session.before)
    handed, here = shown
    assert "\x1b[" in handed  # colours: the handed command saw a terminal
    assert handed == here


def test_ctrl_c_reaches_the_handed_command(local: Local, tmp_path: Path) -> None:
    service, env = local
    statuses = []
    for environment in (env, _here(env)):
        into = tmp_path / f"set-{len(statuses)}.jsonl"
        session = _labelling(into, environment)
        session.sendintr()  # Ctrl-C at the prompt: the terminal signals the caller
        session.expect(pexpect.EOF)
        session.close()
        statuses.append((session.exitstatus, session.signalstatus))
        assert not into.exists()
    assert statuses[0] == statuses[1]
    assert statuses[0] != (0, None)
    assert service.commands_pid is not None
    assert _children(service.commands_pid) == []  # the interrupted child is gone


def _children(pid: int) -> list[int]:
    listed = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(child) for child in listed]


def test_another_installation_runs_the_command_itself(local: Local, tmp_path: Path) -> None:
    _, env = local
    other = tmp_path / "bin" / "python"
    other.parent.mkdir()
    other.symlink_to(sys.executable)  # another interpreter path: not handed over
    found = {**env, "PYTHONPATH": os.pathsep.join(path for path in sys.path if path)}
    ran, handed = _assay(*POWER, env=found, python=str(other))
    assert ran.returncode == 0, ran.stderr
    assert not handed


def test_the_command_process_leaves_with_the_service(local: Local) -> None:
    service, env = local
    assert service.commands_pid is not None
    assert handoff.socket_path().stat().st_mode & 0o077 == 0  # the user's alone
    canary = "CANARY-handoff-7f3a"
    ran, handed = _assay("run", SUITE, "--outputs", V1, "--json", env={**env, "X_SECRET": canary})
    assert ran.returncode in (0, 1) and handed
    written = local_service.log_path().read_text(encoding="utf-8")
    assert canary not in written  # the environment it was sent is written nowhere
    os.kill(service.pid, signal.SIGKILL)
    commands_pid = service.commands_pid
    assert _until(lambda: not local_service.alive(commands_pid))
    assert not handoff.socket_path().exists()
    # Without it, the same command runs in its own process.
    ran, handed = _assay(*POWER, env=env)
    assert ran.returncode == 0 and not handed
    local_service.start(service.store, service.prefect_api, free_port(), timeout=240)
    assert _assay(*POWER, env=env)[1]  # a new one, handed to again


def test_stopping_lets_the_commands_in_flight_finish(local: Local, tmp_path: Path) -> None:
    service, env = local
    assert service.commands_pid is not None
    commands_pid = service.commands_pid
    session = _labelling(tmp_path / "set.jsonl", env)
    assert local_service.stop() is not None  # `assay server stop` while a person labels
    assert _until(lambda: not handoff.socket_path().exists())  # no new command is handed over
    assert local_service.alive(service.commands_pid)  # …but the one in flight goes on
    session.sendline("p")
    session.expect(PROMPT)
    session.sendline("q")
    session.expect(r"Labelled 1 item\(s\); the set holds 1")
    session.expect(pexpect.EOF)
    session.close()
    assert session.exitstatus == 0  # its caller told its status
    assert _until(lambda: not local_service.alive(commands_pid))
    local_service.start(service.store, service.prefect_api, free_port(), timeout=240)


def test_a_socket_in_a_folder_others_may_write_is_not_used(local: Local) -> None:
    _, env = local
    folder = handoff.socket_path().parent
    assert _assay(*POWER, env=env)[1]
    folder.chmod(0o777)  # another user could have put a socket there: not sent anything
    try:
        ran, handed = _assay(*POWER, env=env)
        assert ran.returncode == 0 and not handed
    finally:
        folder.chmod(0o700)
    assert _assay(*POWER, env=env)[1]


def test_ctrl_z_stops_the_handed_command_with_its_caller(local: Local, tmp_path: Path) -> None:
    service, env = local
    assert service.commands_pid is not None
    session = _labelling(tmp_path / "set.jsonl", env)
    [child] = _children(service.commands_pid)
    session.sendcontrol("z")  # the terminal stops its foreground process: the caller
    assert _until(lambda: _state(child) == "T")  # the command stopped with it
    os.kill(session.pid, signal.SIGCONT)  # `fg`
    assert _until(lambda: _state(child) != "T")
    assert _state(child) in ("S", "R")
    session.sendline("q")
    session.expect(r"Labelled 0 item\(s\)")
    session.expect(pexpect.EOF)
    session.close()
    assert session.exitstatus == 0


def _state(pid: int) -> str:
    """A process's state letter (`T`: stopped) from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("State:"):
            return line.split()[1]
    raise AssertionError(f"no state for {pid}")
