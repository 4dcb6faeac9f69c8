"""Waiting for a submitted batch (`assay.judge.batch`): a look every `poll_seconds`, each change
of counts logged and handed to `on_wait` (the task layer shows it as the task run's state
message, `tasks/batch_wait.py`), until the batch ends."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from openai import OpenAI

logger = logging.getLogger("assay.judge.batch")

ENDED: Final = frozenset({"completed", "failed", "expired", "cancelled"})
"""Batch statuses after which nothing more will be answered (`cancelling` is not one)."""


@dataclass(frozen=True)
class BatchWait:
    """Where a batch stands, as the Batch API counts it (no text)."""

    batch_id: str
    status: str
    done: int
    failed: int
    total: int

    @property
    def ended(self) -> bool:
        return self.status in ENDED

    @property
    def message(self) -> str:
        """`waiting for batch batch_abc: 312/500 done, 3 failed`, or once it ended
        `batch batch_abc completed: 500/500 done, 0 failed`."""
        counts = f"{self.done}/{self.total} done, {self.failed} failed"
        if self.ended:
            return f"batch {self.batch_id} {self.status}: {counts}"
        return f"waiting for batch {self.batch_id}: {counts}"


OnWait = Callable[[BatchWait], None]
"""Told each change of a batch's status or counts while it is waited for, and its end."""


def wait_for_batch(
    client: OpenAI,
    batch_id: str,
    total: int,
    poll_seconds: float,
    on_wait: OnWait | None = None,
) -> Any:
    """The batch once it ended, looked at every `poll_seconds` (a sleep, not a busy loop); each
    change of status or counts logged and handed to `on_wait`, whose failure never stops the
    wait (showing the wait is not worth losing the judging)."""
    seen: BatchWait | None = None
    while True:
        batch = client.batches.retrieve(batch_id)
        counts = batch.request_counts
        done, failed = (counts.completed, counts.failed) if counts else (0, 0)
        now = BatchWait(batch.id, batch.status, done, failed, total)
        if now != seen:
            seen = now
            logger.info(
                "judge batch %s: %s, %d of %d done, %d failed",
                batch.id,
                batch.status,
                done,
                total,
                failed,
            )
            if on_wait is not None:
                try:
                    on_wait(now)
                except Exception as exc:
                    logger.warning(
                        "judge batch %s: wait not shown (%s)", batch.id, type(exc).__name__
                    )
        if now.ended:
            return batch
        time.sleep(poll_seconds)
