"""Errors that Assay reports to users.

Every message is built from file names, line numbers, field paths and configuration — never from
candidate output text — because exceptions end up in logs and in Prefect's database.
"""

from __future__ import annotations

from typing import Final

SHOWN_CHARS: Final = 80
"""The most characters of a user-supplied identifier that a message quotes."""


def shown(identifier: object, limit: int = SHOWN_CHARS) -> str:
    """A user-supplied identifier (case id, trial id, …) as messages quote it: escaped like
    `repr` (quotes, newlines, control characters) and clamped to `limit` characters, with the
    full length said, so a hostile id cannot make a "one-line" error long or multi-line."""
    text = str(identifier)
    quoted = repr(text)
    if len(text) <= limit:
        return quoted
    return f"{repr(text[:limit])[:-1]}…{quoted[-1]} ({len(text):,} characters)"


class AssayError(Exception):
    """Base class for errors Assay raises on purpose."""


class InputError(AssayError):
    """A user-supplied file (suite, outputs, …) is malformed.

    Attributes:
        source: File name or URI the problem was found in.
        line: 1-based line number, when known.
        field: Dotted field path, when known.
        problem: What is wrong, in words.
    """

    def __init__(
        self, source: str, problem: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source} line {self.line}"
        if self.field:
            where += f", field {self.field}"
        return f"{where}: {self.problem}"

    def __reduce__(self) -> tuple[object, ...]:
        # Prefect pickles exceptions across task boundaries; keyword-only args need help.
        return (_rebuild_input_error, (self.source, self.problem, self.line, self.field))


def _rebuild_input_error(
    source: str, problem: str, line: int | None, field: str | None
) -> InputError:
    return InputError(source, problem, line=line, field=field)


class OutputsChangedError(InputError):
    """An outputs object no longer holds what the run's index saw when it pinned it.

    The index records each slice's digest (and an S3 object's ETag and version); a chunk that
    finds other bytes, fewer bytes, other case ids or another object fails the run with this one
    line. Retrying cannot fix it, and scoring what is there would score other outputs.

    Attributes:
        chunk: The chunk (slice of the index) that found the change, when one did.
    """

    def __init__(self, source: str, problem: str, *, chunk: int | None = None) -> None:
        self.chunk = chunk
        super().__init__(source, problem)

    def __str__(self) -> str:
        where = self.source if self.chunk is None else f"{self.source} chunk {self.chunk}"
        return f"outputs changed during the run: {where} ({self.problem})"

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_outputs_changed, (self.source, self.problem, self.chunk))


def _rebuild_outputs_changed(source: str, problem: str, chunk: int | None) -> OutputsChangedError:
    return OutputsChangedError(source, problem, chunk=chunk)


class NotFoundError(AssayError):
    """A suite, version or run that was asked for does not exist."""


class EvidenceConflictError(AssayError):
    """A write-once evidence object already exists with different content."""


class StoreUnavailableError(AssayError):
    """The evidence store could not be reached, even after bounded retries.

    The message names the endpoint, bucket or key, the operation, the attempts made and the last
    error type, never object content. It is an `AssayError` so that Prefect does not retry it
    again on top of the retries that already ran out.

    `retryable`: the store did not answer (down, throttled, past its deadline), so the same
    request may succeed later; False when only a change of configuration can help.
    """

    def __init__(self, message: str, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.retryable))
