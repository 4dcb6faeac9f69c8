"""Request values the service parses with the CLI's parsers, named as the request names them."""

from __future__ import annotations

from assay.errors import InputError
from assay.subject import Subject


def subject_param(text: str) -> Subject:
    """`KIND:ID[@VARIANT]` from a request's `subject` (the CLI's parser calls it `--subject`)."""
    try:
        return Subject.parse(text)
    except InputError as exc:
        raise InputError("subject", exc.problem) from None
