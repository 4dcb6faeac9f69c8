"""Shared pieces of the `assay` command line: the app, consoles, options and error handling."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.text import Text

from assay import progress
from assay.errors import AssayError, InputError, NotFoundError
from assay.store import EvidenceStore, open_store
from assay.suites import registry
from assay.suites.suite import load_suite

EXIT_USAGE = 2
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

app = typer.Typer(
    help="Assay: score agent outputs against versioned golden suites, with honest evidence.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

StoreOption = Annotated[
    str | None,
    typer.Option("--store", help="Evidence store URI (default: $ASSAY_STORE or file://.assay)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
JudgeBlockOption = Annotated[
    str | None,
    typer.Option("--judge-block", help="Saved JudgeSettings block (default: the environment)."),
]
FreshJudgeOption = Annotated[
    bool, typer.Option("--fresh-judge", help="Ignore cached verdicts; judge again.")
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
    except (InputError, NotFoundError) as exc:
        fail(str(exc))
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"])
        fail(f"{field}: {first['msg']}" if field else first["msg"])
    except ValueError as exc:
        fail(str(exc))
    except AssayError as exc:
        fail(f"{type(exc).__name__}: {exc}")


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, ensure_ascii=False, default=str) + "\n")


def open_evidence(uri: str | None) -> EvidenceStore:
    return guarded(lambda: open_store(uri))


def prefect_defaults() -> None:
    """Quiet, offline-friendly Prefect defaults for a terminal; users' own settings win."""
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # The ephemeral API migrates a fresh SQLite database on first use; Prefect's 20 s default
    # times out on a busy 2-core machine (see ../shared/PREFECT-NOTES.md).
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")


@contextmanager
def progress_bar(enabled: bool) -> Iterator[None]:
    if not enabled:
        yield
        return
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


def resolve_suite_arg(evidence: EvidenceStore, suite: str) -> str:
    """A suite file is published first; a NAME[@VERSION] must exist. Returns `name@version`."""
    if Path(suite).is_file():
        version, _ = guarded(lambda: registry.publish(evidence, load_suite(suite)))
    else:
        version, _ = guarded(lambda: registry.resolve(evidence, suite))
    return version.ref


def block_name(name: str) -> str:
    if not re.fullmatch(r"[a-z0-9-]+", name):
        raise InputError(name, "block names use lowercase letters, digits and dashes")
    return name
