"""How long an identifier may be: one limit for every name that becomes part of an evidence key.

Run ids, suite names and a subject's kind, id and variant end up as path segments of store keys
(`runs/<run id>/…`, `baselines/<suite>/<kind>/<id>/<variant>/…`), so each must fit in one file
name, which common file systems cap at 255 bytes. The limit leaves room for what a key adds
around a segment, and it is checked where an identifier enters (the CLI, HTTP request models,
a record being validated), before anything is scored or written.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import AfterValidator

from assay.errors import InputError

MAX_IDENTIFIER_BYTES: Final = 128
"""The most UTF-8 bytes of a run id, suite name, or subject kind, id or variant."""


def length_problem(value: str) -> str | None:
    """What is wrong with the length of `value`, or None when it is within the limit."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size <= MAX_IDENTIFIER_BYTES:
        return None
    return f"is {size:,} bytes long; identifiers are at most {MAX_IDENTIFIER_BYTES} bytes (UTF-8)"


def check_length(value: str, what: str) -> str:
    """`value` when within the limit; else an InputError naming `what` (`RUN_ID`, `--subject`)."""
    problem = length_problem(value)
    if problem is not None:
        raise InputError(what, problem)
    return value


def _bounded(value: str) -> str:
    problem = length_problem(value)
    if problem is not None:
        raise ValueError(problem)
    return value


Identifier = Annotated[str, AfterValidator(_bounded)]
"""A string field that becomes part of an evidence key (pydantic: a validation error, HTTP 422)."""
