"""Assay's own log lines, sent through Prefect's run logger to the run's Logs tab.

Counts and verdicts only, never output text. Outside a run (a task body called with `.fn()`),
they go to the standard `assay` logger instead.
"""

from __future__ import annotations

import logging
from typing import Any

from prefect import get_run_logger
from prefect.exceptions import MissingContextError


def run_log() -> logging.Logger | logging.LoggerAdapter[Any]:
    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("assay")
