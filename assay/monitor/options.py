"""What the monitor flow takes: the signals, the window, who should report, the thresholds,
where the evidence goes and where findings are sent."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from assay.choices import NotificationChoice, StoreChoice
from assay.monitor.plan import SequencePlan
from assay.monitor.thresholds import MonitorThresholds


class MonitorOptions(StoreChoice, NotificationChoice):
    """Session health per subject over [now − window, now) against the window before.

    The notification block's `finding_kinds` must include `monitor_threshold` and
    `monitor_no_data` (its defaults do).
    """

    signals: str | None = Field(
        default=None,
        description="Path or URI of a JSONL file, folder or `s3://` prefix of session signals "
        "(default: the signals `POST /v1/traces` appended to the evidence store).",
    )
    window: str = Field(default="24h", description="Window length: `30m`, `6h`, `24h`, `7d`.")
    now: datetime | None = Field(
        default=None, description="End of the window (default: when the flow runs)."
    )
    expect: list[str] = Field(
        default_factory=list,
        description="Subjects (`KIND:ID[@VARIANT]`) that should be reporting; one without "
        "signals in the window is listed as no data and gives a `monitor_no_data` finding.",
    )
    thresholds: MonitorThresholds = Field(
        default_factory=MonitorThresholds,
        description="When a subject's figures give a `monitor_threshold` finding.",
    )
    sequence: SequencePlan | None = Field(
        default=None,
        description="The pre-registered monitoring plan: anytime-valid confidence sequences from "
        "its start (and, with a baseline, a state per subject) replace the fixed-n interval "
        "rules. Recorded on first use; a later change to its margin is refused.",
    )
