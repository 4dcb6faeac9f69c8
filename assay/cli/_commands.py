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
    "compare": Listed(
        "compare",
        "Pairwise A/B: judge each shared case that has an llm_judge check twice, with the order\n"
        "swapped. Cases without an llm_judge check are not compared (the rubric is what is "
        "judged).",
    ),
    "run": Listed(
        "runs",
        "Score outputs against a suite in a Prefect flow and record the evidence (or, with\n"
        "--server / $ASSAY_URL, have the Assay service do it).",
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
    "scorecard": Listed(
        "scorecard",
        "Per subject and suite: runs, latest and pooled pass rate with Wilson intervals, trend.",
    ),
    "serve": Listed(
        "serve",
        "Serve the HTTP API (docs/api.md); every route but /healthz needs a Bearer token.\n"
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
        "Keep a local Prefect server (API and UI) running between commands.",
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

OPTION_HELP: Final[dict[str, str]] = {
    "baseline": (
        "Run id to compare with (default: the pinned baseline, else the latest comparable run)."
    ),
    "calibration": (
        "Calibration set: add the PPI++ judge-corrected pass rate of the `llm_judge` checks "
        "(when it was calibrated for this run's judge)."
    ),
    "chunk_size": "Cases per scoring chunk (default 2000).",
    "dask": (
        "Score chunks on the Dask scheduler at ADDRESS (or `block:NAME`) (default: "
        "`$ASSAY_DASK_ADDRESS`; applied where the run is launched)."
    ),
    "fresh_judge": "Ignore cached verdicts; judge again.",
    "judge_block": (
        "Saved JudgeSettings block (default: the environment, `ASSAY_JUDGE_MODEL`, "
        "`OPENAI_API_KEY`, `OPENAI_BASE_URL`; neither: `llm_judge` checks are skipped)."
    ),
    "judge_repeats": (
        "Judge each `llm_judge` check K times: majority verdict, even split skipped, flip rate "
        "reported (default: the JudgeSettings block's, else 1)."
    ),
    "max_judge_flip_rate": (
        "Fail the gate when more than this share of checks flip across judge repeats (or the "
        "flip rate was not measured); no limit by default."
    ),
    "resume": (
        "Re-run an interrupted run under its `run_id`, keeping its evidence; an unknown id is "
        "an error, not a new run."
    ),
    "sample": "Score only N cases, chosen reproducibly by the seed.",
    "seed": "Seed that chooses the sampled cases.",
    "store": "Evidence store URI (default: `$ASSAY_STORE` or file://.assay).",
    "subject": (
        "`KIND:ID[@VARIANT]`, e.g. `agent:bot@v2` (default: `agent:OUTPUTS-NAME`, the outputs "
        "file or folder name without its suffix)."
    ),
    "workers": "Score chunks on a temporary local Dask cluster of N worker processes.",
}
"""The run options' descriptions (`assay.runs.options`, whose models take longer to import
than the rest of the command line), for their flags' `--help`."""

DEFAULT_CASE_ATTRIBUTE: Final = "assay.case_id"
"""`assay.outputs.DEFAULT_CASE_ATTRIBUTE`: `--case-attribute`'s default."""
