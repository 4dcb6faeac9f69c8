"""Shared pieces of the `assay` command line: the app, consoles, options and error handling."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar, get_args

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperCommand, TyperGroup

from assay import help_texts
from assay.cli._commands import COMMANDS
from assay.errors import AssayError, InputError, NotFoundError, shown
from assay.identifiers import check_length

if TYPE_CHECKING:
    from assay.cli import local_service
    from assay.outputs.reference import OutputsReference
    from assay.store import EvidenceStore

EXIT_USAGE = 2
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

out = Console()
err = Console(stderr=True)


def fresh_consoles() -> None:
    """Look again at the standard streams `out` and `err` write to (a terminal? what colours?
    how wide?): a command handed to the warm command process (`assay.cli.handoff`) writes to
    its caller's streams, which its consoles did not see when they were made."""
    Console.__init__(out)
    Console.__init__(err, stderr=True)


def flag_help(description: str) -> str:
    """A field's description (`assay.help_texts`, a model's) as a flag's `--help` shows it: no
    Markdown, no Rich markup."""
    return description.replace("`", "").replace("[", "\\[")


def _unwrapped_unless_sized() -> None:
    """Output that is not a terminal (a CI log, a pipe) is not hard-wrapped at 80 columns — a
    wrapped line breaks mid-phrase and cuts what a log search looks for — unless `COLUMNS` says
    how wide it is."""
    sized = "COLUMNS" in os.environ
    out.soft_wrap = not sized and not out.file.isatty()
    err.soft_wrap = not sized and not err.file.isatty()


def table(*headers: str, title: str | None = None) -> Table:
    """A table whose cells wrap instead of being cut with `…` on a narrow terminal: a run id or
    a subject must stay whole enough to copy (`runs show` takes a unique prefix) and to tell v1
    from v2."""
    return Table(*(Column(header, overflow="fold") for header in headers), title=title)


def error_message(exc: AssayError) -> str:
    """The one line a user sees for one of Assay's own errors."""
    if isinstance(exc, InputError | NotFoundError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def os_error_message(exc: OSError) -> str:
    """The one line for a file-system error met outside the evidence store (a path too long,
    a folder where a file was expected): the path, clamped, and what the system said."""
    where = f"{shown(exc.filename)}: " if exc.filename else ""
    return f"{where}{exc.strerror or type(exc).__name__}"


class _Commands(TyperGroup):
    """The top-level commands, loaded lazily: `COMMANDS` names each one's module, imported only
    when the command runs (`assay runs show` through a service imports neither the gate nor
    the suites, let alone Prefect), and its help, which `assay --help` lists without importing
    any (docs/cli.md, "Start-up").

    Every command's Assay errors (an unreachable store above all, which any command that reads
    evidence can meet) and file-system errors end as one line on stderr and exit 2, never as a
    traceback."""

    _listing = False

    # `Any`: a click Context, HelpFormatter and Command; typer vendors click privately.
    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        listed = COMMANDS.get(cmd_name)
        if listed is None:
            return None
        if self._listing:
            return TyperCommand(cmd_name, help=listed.help)
        built = self.commands.get(cmd_name)
        if built is not None:  # its module was imported before this group was built
            return built
        import_module(f"assay.cli.{listed.module}")
        loaded = typer.main.get_command(app)
        assert isinstance(loaded, TyperGroup)  # the app has a callback: always a group
        return loaded.commands.get(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except AssayError as exc:
            fail(error_message(exc))
        except OSError as exc:
            fail(os_error_message(exc))
        except NoArgsIsHelpError:
            raise  # a group named alone: its help, as usual
        except UsageError as exc:  # a flag's value of the wrong type or out of range, …
            where = f" ({exc.ctx.command_path} --help)" if exc.ctx else ""
            fail(f"{exc.format_message()}{where}")


app = typer.Typer(
    cls=_Commands,
    help="Assay: score agent outputs against versioned golden suites, with honest evidence.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


_verbose = False
_debug = False
"""`assay -v` and `assay --debug`, for the Prefect logging of the command's flow runs."""


@app.callback()
def _global_options(
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Show Prefect's run log lines in the terminal."),
    ] = False,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Also print the errors and tracebacks of failing flow and task runs (they are "
            "always in the run's Logs in the Prefect UI).",
        ),
    ] = False,
) -> None:
    global _verbose, _debug
    _verbose, _debug = verbose, debug
    _unwrapped_unless_sized()


StoreOption = Annotated[str | None, typer.Option("--store", help=flag_help(help_texts.STORE))]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
JudgeBlockOption = Annotated[
    str | None, typer.Option("--judge-block", help=flag_help(help_texts.JUDGE_BLOCK))
]
FreshJudgeOption = Annotated[
    bool, typer.Option("--fresh-judge", help=flag_help(help_texts.FRESH_JUDGE))
]
OUTPUTS_FLAG = typer.Option(
    "--outputs",
    help="Outputs, their traces or transcripts: a file, a folder or an s3:// prefix "
    "(docs/records.md).",
)
OutputsOption = Annotated[str, OUTPUTS_FLAG]
OutputsFormatOption = Annotated[
    str,
    typer.Option(
        "--outputs-format",
        help="auto (by content); jsonl; openai-chat, openai-responses, anthropic or langchain"
        " (outputs lines whose messages are in that format); otlp (OTLP trace exports: JSON,"
        " JSON Lines or protobuf); atif, claude-code or codex (one transcript file per case,"
        " named after it). docs/records.md.",
    ),
]
CaseAttributeOption = Annotated[
    str,
    typer.Option(
        "--case-attribute", help="Span (or resource) attribute naming the case in OTLP traces."
    ),
]


ServerOption = Annotated[
    str | None,
    typer.Option(
        "--server",
        help="Call the Assay service at URL instead of running here (default $ASSAY_URL).",
    ),
]


LocalOption = Annotated[
    bool,
    typer.Option(
        "--local",
        "--no-server",
        help="Run in this process: neither go through the local Assay service nor start it "
        "(as ASSAY_LOCAL=1).",
    ),
]


@dataclass(frozen=True)
class Endpoint:
    """The Assay service a command goes through (`assay.cli.remote`)."""

    url: str
    token: str | None = None
    """Its credential; None: `$ASSAY_TOKEN`."""
    local: bool = False
    """The lasting local service (`assay server start`): it reads the user's paths itself."""
    prefect_ui: str | None = None
    """The local service's Prefect UI, for a run's link."""

    def announce(self, run_id: str) -> None:
        """Say, on stderr, where a run it ran is: its Prefect UI page when known, else which
        service ran it."""
        if self.prefect_ui is not None:
            link = f"{self.prefect_ui}/runs/flow-run/{run_id}"
            err.print(f"Prefect UI: {link}", highlight=False, soft_wrap=True)
        err.print(path_taken(self), highlight=False, soft_wrap=True)


def service(
    server: str | None, store: str | None, *, local: bool = False, start: bool = False
) -> Endpoint | None:
    """The service a command goes through: `--server`, else `$ASSAY_URL`, else the lasting local
    service when it is up and keeps the command's store (`assay.cli.local_service`) — with
    `start`, started for a person at a terminal when it is not, said in one line — unless
    `local` (`--local`); None: run here. A `--store` is refused with a remote service: it has
    its own."""
    url = server or os.environ.get("ASSAY_URL") or None
    if url is not None:
        if store is not None:
            fail("--store is not available when calling a service")
        return Endpoint(url)
    if local:
        return None
    from assay.cli import local_service

    found = local_service.for_store(store)
    if found is None and start and local_service.may_start():
        found = _started_for_user(store)
    if found is None:
        return None
    ui = found.prefect_api.removesuffix("/").removesuffix("/api")
    return Endpoint(found.url, found.token, local=True, prefect_ui=ui)


def path_taken(endpoint: Endpoint | None) -> str:
    """Where a command's runs happen, as a person reads it."""
    if endpoint is None:
        return (
            "runs in this process, on the `assay server start` Prefect server if it is up, "
            "else a temporary API (`assay server start` makes runs faster)"
        )
    which = "the local Assay service" if endpoint.local else "the Assay service"
    return f"runs through {which} at {endpoint.url}"


def _started_for_user(store: str | None) -> local_service.LocalService | None:
    """The local servers started for this command, said in one line on stderr; None (and a
    warning: the command runs here) when they did not start."""
    from assay.cli import local_service, orchestration

    try:
        started = local_service.start_for_user(store)
    except local_service.NotStartedError as exc:
        err.print(f"[yellow]warning:[/yellow] {exc}; running here", highlight=False)
        return None
    prefect = orchestration.running_server()
    where = f"Prefect UI {prefect.ui_url}" if prefect else f"Prefect API {started.prefect_api}"
    err.print(
        f"started the local Assay server ({where}); assay server stop ends it", highlight=False
    )
    return started


def checked_run_id(run_id: str | None) -> str | None:
    """A run id given on the command line, refused (one line, exit 2) when longer than an
    identifier may be: it names store keys, so it must fit in a file name."""
    if run_id is not None:
        guarded(lambda: check_length(run_id, "RUN_ID"))
    return run_id


ResumeOption = Annotated[
    str | None,
    typer.Option(
        "--resume",
        metavar="RUN_ID",
        help="Re-run the interrupted run RUN_ID, keeping its evidence; an unknown id is an "
        "error, not a new run.",
        callback=checked_run_id,
    ),
]

T = TypeVar("T")


def fail(message: str) -> NoReturn:
    """Print `error: MESSAGE` on stderr and exit 2; the message is plain text, never markup,
    since it may quote user input such as `KIND:ID[@VARIANT]` or a name like `v[/b]2`."""
    err.print(Text.assemble(("error:", "red"), " ", message), highlight=False, soft_wrap=True)
    raise typer.Exit(EXIT_USAGE)


def guarded(action: Callable[[], T]) -> T:
    """Run `action`, turning Assay's own errors into a one-line message and exit code 2."""
    try:
        return action()
    except AssayError as exc:
        fail(error_message(exc))
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"])
        fail(f"{field}: {first['msg']}" if field else first["msg"])
    except ValueError as exc:
        fail(str(exc))


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def outputs_reference(outputs: str, outputs_format: str, case_attribute: str) -> OutputsReference:
    """The outputs a run reads: the location, the format and the case attribute."""
    from assay.outputs.reference import FORMAT_NAMES, OutputsFormat, OutputsReference

    if outputs_format not in get_args(OutputsFormat):
        fail(f"--outputs-format must be one of {FORMAT_NAMES}")
    return guarded(
        lambda: OutputsReference(
            location=outputs, format=outputs_format, case_attribute=case_attribute
        )
    )


def open_evidence(uri: str | None) -> EvidenceStore:
    from assay.schemes import open_store

    return guarded(lambda: open_store(uri))


def prefect_defaults(*, must_answer: bool = True) -> str | None:
    """Connect to a Prefect server (or fall back to an ephemeral API) with a quiet terminal;
    users' own settings win. Returns the server's API URL, or None when ephemeral. A configured
    API that does not answer is one line, exit 2, unless not `must_answer`."""
    from assay.cli import orchestration

    return orchestration.connect(verbose=_verbose, debug=_debug, must_answer=must_answer)


_ui_note_shown = False


def announce(flow_run_id: object, ended_with_result: bool) -> None:
    """Print a finished run's Prefect UI link on stderr (on a failure too: the run's Logs there
    hold the traceback); on an ephemeral API, say once how to get a UI instead."""
    global _ui_note_shown
    from assay.cli import orchestration

    link = orchestration.ui_link(flow_run_id)
    if link is not None:
        err.print(f"Prefect UI: {link}", highlight=False, soft_wrap=True)
    elif not _ui_note_shown and ended_with_result:
        _ui_note_shown = True
        err.print(
            "note: no Prefect server, so this run used a temporary API and is not kept; "
            "`assay server start` keeps runs and shows them in the Prefect UI.",
            highlight=False,
            soft_wrap=True,
        )


def run_flow(name: str, labels: Sequence[str], *, quiet: bool, **parameters: Any) -> Any:
    """Connect to Prefect, then run `flows.<name>` in this process through the launcher, tagged
    `assay` + `labels`; Assay's errors become one line and exit 2. Call it only once the inputs
    are validated."""
    prefect_defaults()
    from flows.launch import start

    return guarded(
        lambda: start(name, ("assay", *labels), announce=None if quiet else announce, **parameters)
    )


@contextmanager
def progress_bar(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from assay import progress

    bar = Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("chunks"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )
    task_id = bar.add_task("scoring", total=None)

    def update(done: int, total: int) -> None:
        if total > 1:
            bar.update(task_id, completed=done, total=total)

    with bar, progress.listening(update):
        yield


def resolve_suite_arg(evidence: EvidenceStore, suite: str, *outputs: str) -> str:
    """A suite file is published first; a NAME[@VERSION] must exist. Returns `name@version`.

    Each of `outputs` is then validated against that suite here, in the CLI process, before any
    Prefect API is started or contacted: a bad line exits 2 at once, with no flow run created."""
    from assay.outputs.index import validate_outputs
    from assay.suites import registry

    version, golden = guarded(lambda: registry.publish_or_resolve(evidence, suite))
    known = {case.id for case in golden.cases}
    for uri in outputs:
        guarded(partial(validate_outputs, uri, known))
    return version.ref


def block_name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9-]+", name):
        raise InputError(name, "block names use lowercase letters, digits and dashes")
    return name
