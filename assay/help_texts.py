"""The descriptions of what every flow takes (`assay.choices`), and of run options that another
command's flag shares (`cross_suite`, which `assay report --against` takes too), as plain text.

Each is one field's description, and the `--help` of the flag that sets it on every command;
it lives here, apart from its model, because the command line builds those flags at start-up
and must not import pydantic's model machinery for `assay --help` (~45 ms).
"""

from __future__ import annotations

from typing import Final

STORE: Final = "Evidence store URI (default: `$ASSAY_STORE` or file://.assay)."
STORAGE_BLOCK: Final = "Saved EvidenceStorage block; takes precedence over the store."
JUDGE_BLOCK: Final = (
    "Saved JudgeSettings block (default: the environment, `ASSAY_JUDGE_MODEL`, "
    "`OPENAI_API_KEY`, `OPENAI_BASE_URL`; neither: `llm_judge` checks are skipped)."
)
FRESH_JUDGE: Final = "Ignore cached verdicts; judge again."
NOTIFICATION_BLOCK: Final = "Saved NotificationTarget block that findings are sent to."
CROSS_SUITE: Final = (
    "Compare with a `baseline` run of another suite, and say so in the comparison (without it, "
    "such a baseline is refused: it could only read as noise)."
)
