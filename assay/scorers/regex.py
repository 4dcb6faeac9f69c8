"""The regex scorer, matched in linear time with RE2.

RE2 guarantees time linear in the output's length for every pattern, so a hostile pattern such
as `(a+)+$` or a hostile output cannot hang a run. Patterns RE2 cannot run in linear time
(backreferences, lookaround) are rejected when the suite is loaded, naming the case.
"""

from __future__ import annotations

from typing import Any

import re2
from pydantic import field_validator, model_validator

from assay.scorers._registry import PASS, Outcome, Scorer, ScorerConfig, clamp, fail, scorer

_FLAGS = {"i", "m", "s"}


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False  # the error is reported through InputError instead
    return options


def compile_pattern(pattern: str, flags: str = "") -> Any:
    """Compile a pattern with RE2; `flags` is a string of i (ignore case), m, s."""
    prefix = f"(?{''.join(sorted(set(flags)))})" if flags else ""
    try:
        return re2.compile(prefix + pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ValueError(f"invalid regex (RE2 syntax, linear time): {detail}") from None


class RegexConfig(ScorerConfig):
    """`regex`: the pattern matches somewhere in the output."""

    pattern: str
    flags: str = ""

    @field_validator("flags")
    @classmethod
    def _known_flags(cls, flags: str) -> str:
        unknown = set(flags) - _FLAGS
        if unknown:
            raise ValueError(f"unknown regex flags {''.join(sorted(unknown))!r} (use i, m, s)")
        return "".join(sorted(set(flags)))

    @model_validator(mode="after")
    def _compiles(self) -> RegexConfig:
        compile_pattern(self.pattern, self.flags)
        return self


@scorer("regex", RegexConfig, shorthand="pattern")
def regex(config: RegexConfig) -> Scorer:
    """Pass when the pattern matches anywhere in the output."""
    compiled = compile_pattern(config.pattern, config.flags)

    def check(output: str) -> Outcome:
        # RE2 matches UTF-8 bytes; given a str, its wrapper encodes it and maps every offset
        # back to characters, which costs more than the match. Only "matched or not" is used.
        return PASS if compiled.search(output.encode()) is not None else fail("no match")

    flags = config.flags
    return Scorer("regex", f"regex /{clamp(config.pattern, 60)}/{flags}", check)
