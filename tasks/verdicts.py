"""A flow's verdict as its final Prefect state: Completed, named for the verdict (see
`assay.verdicts`), and logged to the run's Logs tab."""

from __future__ import annotations

from typing import TypeVar, cast

from prefect.states import Completed

from assay.verdicts import FlowVerdict
from tasks._log import run_log

T = TypeVar("T")


def verdict_state(verdict: FlowVerdict, result: T) -> T:
    """Return this from a flow: its run ends Completed with `verdict`'s name and message.

    Prefect hands a returned State's data to whoever called the flow (a CLI command, a parent
    flow), so callers still get `result`; the cast says so to the type checker.
    """
    run_log().info("verdict: %s (%s)", verdict.name, verdict.message)
    return cast(T, Completed(name=verdict.name, message=verdict.message, data=result))
