"""Agent transcripts — one file, one case: ATIF trajectories, Claude Code sessions, Codex
rollouts. Which format a file is in, and the case it is for.

The case id is the file's name less its suffix (`refund-01.jsonl` is case `refund-01`): a
transcript has no field for a suite's case id, and its session id is the tool's own. Each reader
(`atif`, `claude_code`, `codex`) says in its docstring which version of the format it reads and
where the description came from (`DESCRIBED_BY`).
"""

from __future__ import annotations

from pathlib import PurePosixPath
from types import ModuleType
from typing import Final

from assay.intake import atif, claude_code, codex

READERS: Final[dict[str, ModuleType]] = {
    reader.FORMAT: reader for reader in (atif, claude_code, codex)
}
"""Each transcript format by its public name (`--outputs-format`)."""
HEAD_BYTES: Final = 4096


def detect(head: bytes) -> str | None:
    """The format whose reader recognises a file's first bytes, or None."""
    return next((name for name, reader in READERS.items() if reader.detect(head)), None)


def case_id_of(name: str) -> str:
    """The case a transcript file is for: its name less its suffix."""
    return PurePosixPath(name.rsplit("/", 1)[-1]).stem
