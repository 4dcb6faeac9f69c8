"""Names and tags a suite run once its suite version is known.

A CLI run is named `SUITE@VERSION · SUBJECT` and tagged from the start; a deployment run or a
nightly sub-run is given a suite file or a bare name, so it learns the version only once the
suite is resolved. Then it is renamed and tagged (`assay`, `suite:…`, `subject:…`) the same way.
"""

from __future__ import annotations

from prefect.client.orchestration import get_client
from prefect.runtime import flow_run

from tasks._log import run_log


def label_flow_run(name: str, suite: str, subject: str) -> None:
    """Best effort: a run that cannot be renamed still runs (and says so in its logs)."""
    current = list(flow_run.tags)
    missing = [t for t in ("assay", f"suite:{suite}", f"subject:{subject}") if t not in current]
    if flow_run.name == name and not missing:
        return
    try:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, name=name, tags=current + missing)
    except Exception as exc:  # naming is cosmetic: never fail a run over it
        run_log().warning("could not rename the run to %r: %s", name, type(exc).__name__)
