"""How long an identifier may be: one limit for every name that becomes part of an evidence key.

Run ids, suite names and a subject's kind, id and variant end up as path segments of store keys
(`runs/<run id>/…`, `baselines/<suite>/<kind>/<id>/<variant>/…`), so each must fit in one file
name, which common file systems cap at 255 bytes. The limit leaves room for what a key adds
around a segment, and it is checked where an identifier enters (the CLI, HTTP request models,
a record being validated), before anything is scored or written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Final

from pydantic import AfterValidator

from assay.errors import InputError, NotFoundError

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


MIN_RUN_ID_PREFIX = 4
"""The shortest prefix a run may be named by (as git names commits)."""


def named_run(given: str, run_ids: Iterable[str], where: str) -> str:
    """The one of `run_ids` that `given` is, or is a prefix of (at least `MIN_RUN_ID_PREFIX`
    characters), as a store or a service (`where`) lists them.

    Raises:
        NotFoundError: No run has that id or prefix.
        InputError: The prefix is too short, or names several runs (they are listed).
    """
    matches = sorted({run_id for run_id in run_ids if run_id.startswith(given)})
    if given in matches:
        return given
    if len(given) < MIN_RUN_ID_PREFIX:
        raise InputError(given, f"a run id prefix needs at least {MIN_RUN_ID_PREFIX} characters")
    if not matches:
        raise NotFoundError(f"no run {given} in {where}")
    if len(matches) > 1:
        shown_ids = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
        raise InputError(given, f"prefix of {len(matches)} runs: {shown_ids}")
    return matches[0]
