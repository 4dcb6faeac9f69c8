"""The HTTP service (`assay serve`, SPEC §15): FastAPI over the same domain functions and flows
as the CLI.

An edge of the package, like `assay/cli/`: it may import Prefect and `flows/` (runs go through
the suite-run and gate flows); nothing else in `assay/` does.
"""

from assay.api.app import create_app
from assay.api.settings import ServeSettings

__all__ = ["ServeSettings", "create_app"]
