"""Release signals: read trials by reference → measure and gate each variant → record → publish.

The report is written once to the evidence store as `releases/<report id>.json`, the id being
this flow run's id, and shown as a markdown artifact on the run.
"""

from __future__ import annotations

from pathlib import Path

from prefect.runtime import flow_run

from assay.release import ReleaseReport
from assay.release.options import ReleaseOptions
from assay.release.render import release_verdict
from flows._conventions import assay_flow
from tasks._store import store_reference
from tasks.release import publish_release_artifact, release_report


def _run_name(options: ReleaseOptions) -> str:
    return f"release · {Path(options.trials).name}"


@assay_flow(run_name=_run_name, verdict=release_verdict)
def release(options: ReleaseOptions) -> ReleaseReport:
    """Gate each variant of a trials file on its five release signals (SPEC §12).

    Returns:
        The recorded report: per variant its signals with denominators, every gate's result and
        the first gate that stopped it.
    """
    store_uri = store_reference(options.store, options.storage_block)
    report = release_report(store_uri, options.trials, options.contract, str(flow_run.id))
    publish_release_artifact(report)
    return report
