"""The command line starts fast: a command imports only its own module, `assay --help` lists
every command from `assay.cli._commands` without importing any, and a client-mode command
(`--server` / `$ASSAY_URL`) imports none of the domain it leaves to the service (issue 24's
client-mode benchmark). Each check runs the command line (as `python -m assay.cli …` does) in a
fresh process and reads `sys.modules` when it exits, so what it sees is what a user's shell
pays for (`-X importtime` would miss the modules `importlib.import_module` loads)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import typer.main

from assay.cli import app
from assay.cli._commands import COMMANDS, DEFAULT_CASE_ATTRIBUTE
from assay.outputs.reference import DEFAULT_CASE_ATTRIBUTE as OUTPUTS_DEFAULT_CASE_ATTRIBUTE
from tests.servers import free_port

CLI = Path(__file__).resolve().parent.parent / "assay" / "cli"
HEAVY = (
    "prefect",
    "flows",
    "tasks",
    "blocks",
    "yaml",
    "scipy",
    "statsmodels",
    "numpy",
    "matplotlib",
    "boto3",
    "assay.runs.records",
    "assay.suites",
    "assay.gate",
    "assay.judge",
    "assay.store",
    "assay.finops",
    "assay.release",
    "assay.outputs",
    "assay.runs.options",
)
"""Modules a client-mode command leaves to the service (Prefect, the evidence store, the gate,
the judge, the statistics, the run options' and the outputs' models): each costs tens of
milliseconds to import, some seconds."""


MODULES = "modules at exit:"
RUN = (
    "import atexit, runpy, sys\n"
    f"atexit.register(lambda: print({MODULES!r}, *sys.modules, file=sys.stderr))\n"
    "sys.argv[0] = 'assay'\n"
    "runpy.run_module('assay.cli', run_name='__main__')\n"
)


def _imported(*args: str, env: dict[str, str] | None = None) -> tuple[set[str], str, str, int]:
    """The modules `python -m assay.cli ARGS` had imported when it exited, its stdout, its
    stderr (without the module list) and its exit code."""
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))},
        "COLUMNS": "200",
        **(env or {}),
    }
    ran = subprocess.run(
        [sys.executable, "-c", RUN, *args],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    others, _, modules = ran.stderr.rpartition(MODULES)
    assert modules, ran.stderr
    return set(modules.split()), ran.stdout, others.strip(), ran.returncode


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(f"{h}.") for h in HEAVY))


def _command_modules(modules: set[str]) -> list[str]:
    return sorted({f"assay.cli.{listed.module}" for listed in COMMANDS.values()} & modules)


def test_the_command_table_matches_the_commands_the_modules_define() -> None:
    """The table `assay --help` lists is the commands themselves: every top-level command of
    every module under assay/cli/, with its module and the help its listing shows."""
    for path in sorted(CLI.glob("*.py")):
        if path.stem != "__main__":
            importlib.import_module(f"assay.cli.{path.stem}")
    group = typer.main.get_command(app)
    assert isinstance(group, typer.main.TyperGroup)
    defined = {
        name: (command.callback.__module__ if command.callback else None, command.help)
        for name, command in group.commands.items()
    }
    for info in app.registered_groups:  # a group's callback is typer's; its commands are ours
        first = info.typer_instance.registered_commands[0].callback if info.typer_instance else None
        defined[str(info.name)] = (getattr(first, "__module__", None), defined[str(info.name)][1])
    listed = {name: (f"assay.cli.{entry.module}", entry.help) for name, entry in COMMANDS.items()}
    assert listed == defined
    for command in group.commands.values():  # what else the listing would show of a command
        assert command.short_help is None and not command.hidden and not command.deprecated
        assert not getattr(command, "rich_help_panel", None)  # the default "Commands" panel


def test_the_default_case_attribute_is_the_outputs_one() -> None:
    """The command line's copy of the outputs' default case attribute (its flag's default,
    shown without importing the outputs models) is the outputs' own."""
    assert DEFAULT_CASE_ATTRIBUTE == OUTPUTS_DEFAULT_CASE_ATTRIBUTE


def test_help_lists_every_command_without_importing_one() -> None:
    modules, stdout, stderr, code = _imported("--help")
    assert code == 0, stderr
    for name, entry in COMMANDS.items():
        first_words = " ".join(entry.help.split()[:4])
        assert re.search(rf"│ {name} +{re.escape(first_words)}", stdout), name
    assert _command_modules(modules) == []
    assert _heavy(modules) == []


def test_importing_the_cli_imports_no_command_and_no_domain() -> None:
    command = "import sys, assay.cli; print('\\n'.join(sys.modules))"
    ran = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True)
    modules = set(ran.stdout.split())
    assert "assay.cli" in modules
    assert _command_modules(modules) == []
    assert _heavy(modules) == []
    assert "httpx" not in modules  # only a client-mode command needs it


def test_a_client_mode_command_imports_only_its_module_and_the_client() -> None:
    """`assay runs show --json` through a service (here one that does not answer) imports the
    client and no domain module: it prints the service's JSON as sent (that it is the same JSON
    is tests/test_service_ci.py's). Without `--json` the result's models load while the command
    waits for the answer."""
    url = f"http://127.0.0.1:{free_port()}"
    for env in ({"ASSAY_URL": url}, None):
        args = ("runs", "show", "some-run", "--json") + (() if env else ("--server", url))
        modules, _, stderr, code = _imported(*args, env=env)
        assert code == 2 and f"cannot reach {url}" in stderr.splitlines()[-1], stderr
        assert {"assay.client", "assay.cli.remote", "assay.cli.runs"} <= modules
        assert _command_modules(modules) == ["assay.cli.runs"]
        assert _heavy(modules) == []


def test_a_command_runs_from_its_lazily_loaded_module(tmp_path: Path) -> None:
    """The in-process path still works through the lazy loader: `assay suite list` on an empty
    store loads the suites module only (and a mistyped command is still refused, exit 2)."""
    env = {"ASSAY_STORE": f"file://{tmp_path}"}
    modules, stdout, stderr, code = _imported("suite", "list", "--json", env=env)
    assert code == 0, stderr
    assert stdout.strip() == "[]"
    assert _command_modules(modules) == ["assay.cli.suites"]
    _, _, stderr, code = _imported("sute", "list", env=env)
    assert code == 2 and "No such command 'sute'" in stderr
