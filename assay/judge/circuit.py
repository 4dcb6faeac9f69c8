"""The judge circuit of a suite run's checks (`assay.judge.service.judge_repeated`).

A judge that never answers costs each call its whole deadline (retries included, about a minute
by default): a 2,000-check run would wait hours before failing closed. So each run (its
`run_id`: all its chunks, batches and repeats) has one circuit in this process. After
`BREAKER_FAILURES` consecutive calls that came back `judge unavailable: …` — a timeout, a
connection error, a 5xx or any other error that survived the adapter's retries — the circuit
opens: no further call of that run starts, and every verdict not yet asked is skipped as
`judge unavailable: CircuitOpen` (never a pass; the check reads `unavailable: judge circuit
open …`, so the run fails its coverage and its summary says why). Calls in flight are abandoned
then, as skipped (a judge that failed that many calls in a row would only make them wait out
their deadline; a reply still on its way is not recorded, as after a kill). Any reply (a
verdict, or a malformed one) starts the count again. An open circuit closes after
`BREAKER_OPEN_SECONDS`, so a later resume in a long-lived process (`assay serve`) tries the
judge again. The circuit is per process: chunks on threads share it, each Dask worker process
has its own. Comparisons, calibration and the outcome score judge bounded batches and have none
(`unbroken`).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Final

from assay.judge.port import UNAVAILABLE_PREFIX, judge_unavailable
from assay.process_state import remembered

logger = logging.getLogger(__name__)

BREAKER_FAILURES: Final = 4
"""Consecutive failed judge calls (each after its own retries) that open a run's judge circuit: at
most the calls in flight by default (`ASSAY_JUDGE_CONCURRENCY`), so a judge that never answers
costs one call deadline, not two."""
BREAKER_OPEN_SECONDS: Final = 600.0
"""How long an open judge circuit stays open before the judge is tried again."""
CIRCUITS_KEPT: Final = 256
"""Runs whose circuit this process remembers (the oldest is forgotten first)."""
CIRCUIT_WATCH_SECONDS: Final = 0.25
"""How often a batch in flight looks whether its run's judge circuit opened."""


class CircuitOpen(Exception):
    """Stops a run's judge calls: its judge circuit is open (see the module docstring)."""


CIRCUIT_OPEN: Final = judge_unavailable(CircuitOpen)
"""The skip reason of a verdict not asked because the run's judge circuit was open."""
CIRCUIT_OPEN_WHY: Final = (
    f"judge circuit open after {BREAKER_FAILURES} consecutive failed judge calls; not sent"
)
"""What a suite check skipped for `CIRCUIT_OPEN` says (`unavailable: …`), and the run's summary."""


@dataclass
class Circuit:
    """One run's judge circuit in this process (see the module docstring)."""

    run_id: str
    opens_after: int | None = BREAKER_FAILURES
    """Consecutive failed calls that open it; None: it never opens."""
    failures: int = 0
    opened_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def is_open(self) -> bool:
        with self._lock:
            if self.opened_at is not None and (
                time.monotonic() - self.opened_at >= BREAKER_OPEN_SECONDS
            ):
                self.opened_at, self.failures = None, 0
            return self.opened_at is not None

    def answered(self, reason: str) -> None:
        """Count one call that returned with `reason`: `judge unavailable: …` is a failure,
        anything else (the judge replied) starts the count again."""
        with self._lock:
            failed = reason.startswith(UNAVAILABLE_PREFIX)
            self.failures = self.failures + 1 if failed else 0
            opens = (
                self.opens_after is not None
                and self.failures >= self.opens_after
                and self.opened_at is None
            )
            if opens:
                self.opened_at = time.monotonic()
        if opens:
            logger.warning(
                "judge circuit open for run %s after %d consecutive failed calls: its judged "
                "checks not yet asked are skipped (%s), never passed",
                self.run_id,
                self.failures,
                CIRCUIT_OPEN,
            )


_CIRCUITS: dict[str, Circuit] = {}
_CIRCUITS_LOCK = threading.Lock()
remembered(__name__, "_CIRCUITS", _CIRCUITS.clear, _CIRCUITS_LOCK)


def unbroken(run_id: str) -> Circuit:
    """A circuit that never opens: judgings other than a run's checks."""
    return Circuit(run_id, opens_after=None)


def run_circuit(run_id: str) -> Circuit:
    """The judge circuit of a run's checks in this process, shared by all its chunks."""
    with _CIRCUITS_LOCK:
        found = _CIRCUITS.get(run_id)
        if found is None:
            if len(_CIRCUITS) >= CIRCUITS_KEPT:
                _CIRCUITS.pop(next(iter(_CIRCUITS)))
            found = _CIRCUITS[run_id] = Circuit(run_id)
        return found
