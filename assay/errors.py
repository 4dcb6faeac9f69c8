"""Errors that Assay reports to users.

Every message is built from file names, line numbers, field paths and configuration — never from
candidate output text — because exceptions end up in logs and in Prefect's database.
"""

from __future__ import annotations


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


class NotFoundError(AssayError):
    """A suite, version or run that was asked for does not exist."""


class EvidenceConflictError(AssayError):
    """A write-once evidence object already exists with different content."""


class StoreUnavailableError(AssayError):
    """The evidence store could not be reached, even after bounded retries.

    The message names the endpoint, bucket or key, the operation, the attempts made and the last
    error type, never object content. It is an `AssayError` so that Prefect does not retry it
    again on top of the retries that already ran out.
    """
