"""Reports a person reads: one self-contained HTML page per run, a suite's trend, a calibration
report — built from stored records only (verdicts, scores, labels, statistics; no output text).

Modules: `run` (a run, optionally against a baseline), `trend`, `calibration`, `page` (the shared
HTML frame), `charts` (inline SVG by matplotlib, imported only when a chart is drawn).
"""

REPORTS_PREFIX = "reports/"


def report_key(run_id: str) -> str:
    """Where a run's report is kept in the evidence store (write-once)."""
    return f"{REPORTS_PREFIX}{run_id}.html"


def published_key(run_id: str) -> str:
    """Marks a run's report as final (its flow published it) when the page itself is left to
    the service to build on first request (`tasks.reports.publish_report`), write-once."""
    return f"{REPORTS_PREFIX}{run_id}.published"


REPORTS_URL_ENV = "ASSAY_REPORTS_URL"
"""Where `assay serve` serves reports (`GET /runs/{id}/report`): the service sets it to its own
address for the flows it runs, unless an operator set it (the address people reach it at, behind
a proxy or a wildcard `--host`); a flow's report link then goes there, not to the store."""
