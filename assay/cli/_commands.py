"""What the `assay` command line shows before it imports any domain module: the top-level
commands (each one's module under `assay/cli/`, and the help `assay --help` lists for it, in the
listing's order), and the run options' help and defaults that flags of several commands show.

`assay --help` reads this table instead of importing every command module (each pulls in its
domain: the gate, the suites, the judge…); a command's module is imported only when it runs, and
a command that goes through a service (`assay runs show --json`) does not import the run
options' models to build its flags. `tests/test_cli_startup.py` checks every entry against its
source (the command modules, `assay.runs.options`, `assay.outputs`), so none can drift.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Listed(NamedTuple):
    module: str
    """The module under `assay/cli/` that defines the command."""
    help: str
    """Its help, as the command's own (the docstring, or the group's `help=`)."""


COMMANDS: Final[dict[str, Listed]] = {
    "costs": Listed(
        "costs",
        "Judge spend from the cost ledger: calls, tokens and USD per group, and the total.",
    ),
    "label": Listed(
        "calibration",
        "Label the suite's judged cases pass/fail by hand, appending to a calibration set.\n"
        "\n"
        "The set stores the case and the output text: labelling is the operator's opt-in to "
        "keep\n"
        "them (each field clamped to 4,000 characters). Resumes where the last session stopped.",
    ),
    "calibrate": Listed(
        "calibration",
        "Measure the configured judge against the human labels; exit 1 unless it is calibrated.",
    ),
    "judge": Listed(
        "admission",
        "Admit a judge before its verdicts may gate.",
    ),
    "compare": Listed(
        "compare",
        "Pairwise A/B: judge each shared case that has an llm_judge check twice, with the order\n"
        "swapped. Cases without an llm_judge check are not compared (the rubric is what is "
        "judged).",
    ),
    "run": Listed(
        "run",
        "Score outputs against a suite in a Prefect flow and record the evidence — through the\n"
        "Assay service when one is up (`assay server start`, or --server / $ASSAY_URL).",
    ),
    "demo": Listed(
        "runs",
        "Run the example support-bot suite end to end for two agent versions.",
    ),
    "gate": Listed(
        "gate",
        "Run the suite, then fail (exit 1) on regression, low pass rate, an uncalibrated judge "
        "or\n"
        "a blocked budget; exit 0 otherwise.",
    ),
    "monitor": Listed(
        "monitor",
        "Per subject: completion, failure, high-severity share, cost and tokens, against the\n"
        "previous window; findings when a threshold is crossed. Exit 0 whatever the health.",
    ),
    "outcome": Listed(
        "outcome",
        "Score invocation records per subject: six dimensions, composite, band and action.",
    ),
    "override": Listed(
        "overrides",
        "Override a failed gate (admin tier, ASSAY_TOKEN): changes the effective verdict only.\n"
        "\n"
        "The recorded verdict and the EvalResult stay as they were; every attempt, granted or\n"
        "refused, appends an audit record (`assay audit`).",
    ),
    "audit": Listed(
        "overrides",
        "List audited override attempts, granted and refused, newest last.",
    ),
    "release": Listed(
        "release",
        "Gate each variant on its release signals; exit 0 when all pass, 1 when any fails.",
    ),
    "report": Listed(
        "report",
        "Write one self-contained HTML report: a run (with its comparison, trials, judge and\n"
        "per-case table), a suite's trend (--trend) or a calibration report (--calibration).",
    ),
    "view": Listed(
        "view",
        "Show each case's output, turns and tool calls beside its verdicts, verified against "
        "the\n"
        "run's evidence; served from memory on 127.0.0.1 until Ctrl-C, or written to -o FILE.",
    ),
    "scorecard": Listed(
        "scorecard",
        "Per subject and suite: runs, latest and pooled pass rate with Wilson intervals, trend.",
    ),
    "findings": Listed(
        "findings",
        "List recorded findings (regressions, blocked budgets, uncalibrated judges, …), newest\n"
        "first — through the Assay service when one is up.",
    ),
    "serve": Listed(
        "serve",
        "Serve the HTTP API (docs/api.md); every route but /healthz and /livez needs a Bearer"
        " token.\n"
        "\n"
        "Needs the `serve` extra (`pip install 'assay[serve]'`); without it, refuses to start.",
    ),
    "access": Listed(
        "access",
        "Principals, tiers and tokens.",
    ),
    "baseline": Listed(
        "baselines",
        "Pin, show and unpin baselines.",
    ),
    "store": Listed(
        "blocks",
        "Save evidence storage as a Prefect block.",
    ),
    "budget": Listed(
        "blocks",
        "Save FinOps budgets as Prefect blocks and see what they have left.",
    ),
    "runs": Listed(
        "runs",
        "List and inspect recorded runs.",
    ),
    "github": Listed(
        "github",
        "GitHub: the gate's pull-request comment.",
    ),
    "server": Listed(
        "server",
        "Keep a local Prefect server (API and UI) and the Assay service running between commands.",
    ),
    "suite": Listed(
        "suites",
        "Publish, show and list versioned golden suites.",
    ),
    "outputs": Listed(
        "outputs",
        "Inspect what Assay reads from your records (no scoring, no storing, no Prefect).",
    ),
}

DEFAULT_CASE_ATTRIBUTE: Final = "assay.case_id"
"""`assay.outputs.DEFAULT_CASE_ATTRIBUTE`: `--case-attribute`'s default."""
