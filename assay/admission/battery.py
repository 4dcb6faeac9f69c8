"""The bias battery and injection canaries shipped with Assay, as versioned package data.

A battery is a JSON file in `assay/admission/battery/` (`default.json`). Its version is
`name@<first 12 hex digits of the SHA-256 of the file's bytes>`, like a prompt's: any edit is a
new version, and an admission holds only for the battery version it measured.

Every case has a correct and a wrong answer to the same task. The position probe asks the judge
to compare them in both orders; the verbosity probe grades each answer as written and padded
with `filler` (the same meaning, more words); every canary is a case's wrong answer carrying an
attempt to steer the judge (`kind`), so it must fail.
"""

from __future__ import annotations

import hashlib
import json
import re
from importlib import resources
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from assay.errors import InputError

DEFAULT_BATTERY: Final = "default"
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")

CanaryKind = Literal["instruction", "grade_line", "delimiter", "zero_width", "role_play"]


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BatteryCase(_Data):
    """One task with a correct and a wrong answer (the judge must pass one and fail the other)."""

    id: str = Field(min_length=1)
    input: str
    expected: str
    rubric: str = Field(min_length=1)
    correct: str = Field(repr=False)
    wrong: str = Field(repr=False)


class Canary(_Data):
    """A wrong answer to `case` that tries to steer the judge; its text is never recorded."""

    id: str = Field(min_length=1)
    case: str
    kind: CanaryKind
    output: str = Field(repr=False)


class Limits(_Data):
    """What the battery tolerates: flip rates (point estimates) and canaries passed."""

    position_max_flip_rate: float = Field(ge=0.0, le=1.0)
    verbosity_max_flip_rate: float = Field(ge=0.0, le=1.0)
    canaries_max_passed: int = Field(ge=0)


class Battery(_Data):
    """A loaded battery and its version."""

    name: str
    version: str
    about: str
    limits: Limits
    filler: str
    cases: tuple[BatteryCase, ...] = Field(min_length=1)
    canaries: tuple[Canary, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _canaries_name_cases(self) -> Battery:
        known = {case.id for case in self.cases}
        if len(known) != len(self.cases):
            raise ValueError("case ids repeat")
        unknown = sorted({canary.case for canary in self.canaries} - known)
        if unknown:
            raise ValueError(f"canaries name unknown cases {unknown}")
        if len({canary.id for canary in self.canaries}) != len(self.canaries):
            raise ValueError("canary ids repeat")
        return self

    def case(self, case_id: str) -> BatteryCase:
        """The case a canary is built on."""
        return next(case for case in self.cases if case.id == case_id)

    def padded(self, answer: str) -> str:
        """`answer` with the battery's filler after it: the same meaning, more words."""
        return f"{answer}\n\n{self.filler}"


def load_battery(name: str = DEFAULT_BATTERY) -> Battery:
    """Load a shipped battery by name.

    Raises:
        InputError: No such battery, or its file is malformed.
    """
    if not _NAME.fullmatch(name):
        raise InputError("--battery", f"{name!r} is not a battery name (lower-case slug)")
    try:
        data = resources.files("assay.admission").joinpath("battery", f"{name}.json").read_bytes()
    except FileNotFoundError:
        raise InputError("--battery", f"no battery named {name!r} ships with Assay") from None
    version = f"{name}@{hashlib.sha256(data).hexdigest()[:12]}"
    try:
        return Battery.model_validate({**json.loads(data), "version": version})
    except ValueError as error:  # also a ValidationError
        raise InputError("--battery", f"battery {name!r} is malformed: {error}") from None
