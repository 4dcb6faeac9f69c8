"""Release signals: read trials by reference → measure and gate each variant → record → publish.

The report is written once to the evidence store as `releases/<report id>.json`, the id being
this flow run's id, and shown as a markdown artifact on the run.
"""

from __future__ import annotations

from pathlib import Path

from prefect import flow
from prefect.runtime import flow_run

from assay.release import ReleaseReport
from assay.release.render import release_verdict
from flows.launch import untagged_tasks
from tasks._store import store_reference
from tasks.release import publish_release_artifact, release_report
from tasks.verdicts import verdict_state


def _run_name() -> str:
    return f"release · {Path(str(flow_run.parameters['trials'])).name}"


@flow(name="release", flow_run_name=_run_name, persist_result=False, log_prints=False)
def release(
    trials: str,
    contract: str | None = None,
    store: str | None = None,
    storage_block: str | None = None,
) -> ReleaseReport:
    """Gate each variant of a trials file on its five release signals (SPEC §12).

    Args:
        trials: Path or `s3://` URI of a JSONL file, one trial evidence record per line.
        contract: Path of a release contract (YAML); None uses the defaults.
        store: Evidence store URI; defaults to `ASSAY_STORE` or `file://.assay`.
        storage_block: Name of a saved EvidenceStorage block; takes precedence over `store`.

    Returns:
        The recorded report: per variant its signals with denominators, every gate's result and
        the first gate that stopped it.
    """
    with untagged_tasks():  # the flow run carries the tags
        report = release_report(
            store_reference(store, storage_block), trials, contract, str(flow_run.id)
        )
        publish_release_artifact(report)
        return verdict_state(release_verdict(report), report)
