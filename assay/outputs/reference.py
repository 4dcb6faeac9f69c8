"""Where outputs are and how to read them (`OutputsReference`), and the formats it may name.

Kept free of `assay.intake` and `assay.trajectory`: the run options carry a reference, and
importing them must stay cheap.
"""

from __future__ import annotations

from typing import Final, Literal, get_args
from urllib.parse import parse_qsl, urlencode

from pydantic import BaseModel, Field

from assay.errors import InputError

OutputsFormat = Literal[
    "auto",
    "jsonl",
    "otlp",
    "openai-chat",
    "openai-responses",
    "anthropic",
    "langchain",
    "atif",
    "claude-code",
    "codex",
]
"""`auto` tells each file's format by its content; `jsonl` is outputs lines whose `messages`
are told by shape; a message-list format is outputs lines whose `messages` must be in it;
`otlp` is OTLP trace exports (JSON, JSON Lines or protobuf); the rest are transcripts."""
FORMAT_NAMES: Final = ", ".join(get_args(OutputsFormat))
DEFAULT_CASE_ATTRIBUTE: Final = "assay.case_id"


class OutputsReference(BaseModel):
    """Where outputs are and how to read them: a suite run carries it structured
    (`RunOptions.outputs`).

    Its string form — `PATH_OR_URI` alone reads JSONL or OTLP trace exports, told apart by
    content; `PATH_OR_URI?format=otlp&case_attribute=NAME` forces the format or names the case
    attribute — is what a run records and what readers given a string (`parse`) take.
    """

    location: str
    format: OutputsFormat = "auto"
    case_attribute: str = Field(default=DEFAULT_CASE_ATTRIBUTE, min_length=1, max_length=255)

    @classmethod
    def parse(cls, uri: str) -> OutputsReference:
        """Split a reference; a `?` followed by anything but these options is part of the path."""
        location, mark, query = uri.rpartition("?")
        options = dict(parse_qsl(query)) if mark else {}
        if not options or not options.keys() <= {"format", "case_attribute"}:
            return cls(location=uri)
        try:
            return cls(location=location, **options)
        except ValueError:
            raise InputError(uri, f"format must be one of {FORMAT_NAMES}") from None

    def __str__(self) -> str:
        options = {
            key: value
            for key, value in (("format", self.format), ("case_attribute", self.case_attribute))
            if value != type(self).model_fields[key].default
        }
        return f"{self.location}?{urlencode(options)}" if options else self.location
