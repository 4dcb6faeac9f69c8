"""The `assay` command line (Typer + Rich).

Exit codes: 0 when the command did its job (a run completed, whatever its verdict); 2 on usage or
input errors, with one line naming file, line and field. The only package in `assay/` allowed to
import Prefect, and only inside the commands that launch flows (so `assay suite …` stays fast).
One module per command family; each registers its commands on the shared `app`, and is imported
only when one of its commands runs (`assay.cli._commands` lists them for `assay --help`).

`main` first offers the command to the local service's warm command process
(`assay.cli.handoff`), before it imports Typer, Rich or Pydantic; the command runs here when
there is none.
"""

import gc
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from assay.cli import handoff

if TYPE_CHECKING:
    from assay.cli._common import app

__all__ = ["app", "main", "run_here"]


def __getattr__(name: str) -> Any:
    if name == "app":  # imported when asked for: `main` may never need it
        from assay.cli._common import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point."""
    status = handoff.hand_over(sys.argv)
    if status is not None:
        raise SystemExit(status)
    run_here()


def run_here(command_line: Callable[[], object] | None = None) -> None:
    """Run the command line in this process (`command_line`: the app's command, built before;
    default: built now, as `app()` does)."""
    from assay.cli._common import app

    try:
        (command_line or app)()
    finally:
        # The interpreter's last collection at exit walks every object the command left (30 ms
        # of a 0.5 s client call); frozen, they are left to the process's end.
        gc.freeze()
