"""The `assay` command line (Typer + Rich).

Exit codes: 0 when the command did its job (a run completed, whatever its verdict); 2 on usage or
input errors, with one line naming file, line and field. The only package in `assay/` allowed to
import Prefect, and only inside the commands that launch flows (so `assay suite …` stays fast).
One module per command family; each registers its commands on the shared `app`, and is imported
only when one of its commands runs (`assay.cli._commands` lists them for `assay --help`).
"""

import gc

from assay.cli._common import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    finally:
        # The interpreter's last collection at exit walks every object the command left (30 ms
        # of a 0.5 s client call); frozen, they are left to the process's end.
        gc.freeze()
