"""The subject: what was evaluated, `KIND:ID[@VARIANT]` (e.g. `agent:support-bot@v2`).

One grammar and one canonical text form (`str(subject)`), used by the CLI, the flows, run names,
run records, outcome records and budget scopes. A subject is parsed once where it enters (the
CLI, a flow's parameters, a record being validated) and carried as that canonical text.
(Monitor signals apply a stricter rule of their own on top: `assay.monitor.signals`.)
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from assay.errors import InputError, shown
from assay.identifiers import Identifier, length_problem

if TYPE_CHECKING:
    from assay.outputs.reference import OutputsReference

KIND_ID = r"[a-z][a-z0-9_-]*:[^@\s]+"
"""`KIND:ID` without the variant, for patterns that embed a subject (budget scopes)."""
_SUBJECT = re.compile(r"^(?P<kind>[a-z][a-z0-9_-]*):(?P<id>[^@\s]+)(?:@(?P<variant>[^\s]+))?$")


class Subject(BaseModel):
    """What was evaluated: `KIND:ID[@VARIANT]`, e.g. `agent:support-bot@v2`."""

    model_config = ConfigDict(frozen=True)

    kind: Identifier
    id: Identifier
    variant: Identifier | None = None

    @classmethod
    def parse(cls, text: str) -> Subject:
        """Parse `KIND:ID[@VARIANT]`; raises InputError otherwise (also when a part is longer
        than `assay.identifiers.MAX_IDENTIFIER_BYTES`: the parts become store key segments)."""
        match = _SUBJECT.match(text)
        if match is None:
            raise InputError(
                "--subject",
                f"{shown(text)} is not KIND:ID[@VARIANT] (e.g. agent:support-bot@v2)",
            )
        for part in ("kind", "id", "variant"):
            problem = match[part] and length_problem(match[part])
            if problem:
                raise InputError("--subject", f"the {part} {problem}")
        return cls(kind=match["kind"], id=match["id"], variant=match["variant"])

    @classmethod
    def default_for(cls, outputs: OutputsReference | str) -> Subject:
        """`agent:<name of the outputs file or folder>` when no subject is given."""
        if isinstance(outputs, str):
            # Imported here: a client call that names its subject never needs the outputs model.
            from assay.outputs.reference import OutputsReference

            outputs = OutputsReference.parse(outputs)
        location = outputs.location
        name = PurePosixPath(location.rstrip("/")).stem or "unnamed"
        problem = length_problem(name)
        if problem:
            raise InputError(
                "--subject", f"none given, and the outputs name {problem}; give KIND:ID"
            )
        return cls(kind="agent", id=name)

    @classmethod
    def given_or_default(cls, text: str | None, outputs: OutputsReference | str) -> Subject:
        """The `--subject` given (parsed), else the default for the outputs reference."""
        return cls.parse(text) if text else cls.default_for(outputs)

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}" + (f"@{self.variant}" if self.variant else "")
