"""The `assay` command line (Typer + Rich).

Exit codes: 0 when the command did its job (a run completed, whatever its verdict); 2 on usage or
input errors, with one line naming file, line and field. The only package in `assay/` allowed to
import Prefect, and only inside the commands that launch flows (so `assay suite …` stays fast).
One module per command family; each registers its commands on the shared `app`, and is imported
only when one of its commands runs (`assay.cli._commands` lists them for `assay --help`).
"""

from assay.cli._common import app

__all__ = ["app", "main"]


def main() -> None:
    """Console-script entry point."""
    app()
