"""Scorer registry: one decorator, one lookup, one way to parse a scorer spec.

A scorer family registers a pydantic config model and a factory. The factory runs once per
distinct configuration (when a suite is compiled) and returns a callable that scores one output.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

LABEL_LIMIT = 120


class Status(StrEnum):
    """Outcome of one scorer (and, aggregated, of one case)."""

    PASS = "pass"
    FAIL = "fail"
    SKIPPED = "skipped"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a scorer says about one output.

    `reason` is a short word or phrase ("no match", "not valid JSON"). It must be built from the
    scorer's configuration, never from the output text.
    """

    status: Status
    score: float
    reason: str = ""


PASS = Outcome(Status.PASS, 1.0)


def fail(reason: str) -> Outcome:
    """A failed check with its (configuration-derived) reason."""
    return Outcome(Status.FAIL, 0.0, reason)


class ScorerConfig(BaseModel):
    """Base class of every scorer's configuration: immutable, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


ConfigT = TypeVar("ConfigT", bound=ScorerConfig)


class Scorer:
    """A compiled scorer: its name, a redacted label of its configuration, and its check."""

    __slots__ = ("check", "label", "name")

    def __init__(self, name: str, label: str, check: Callable[[str], Outcome]) -> None:
        self.name = name
        self.label = clamp(label)
        self.check = check

    def __call__(self, output: str) -> Outcome:
        try:
            return self.check(output)
        except Exception as exc:  # a scorer bug must not sink the run, nor pass the case
            return Outcome(Status.ERROR, 0.0, f"scorer error ({type(exc).__name__})")


@dataclass(frozen=True)
class ScorerType(Generic[ConfigT]):
    """A registered scorer family."""

    name: str
    config: type[ConfigT]
    build: Callable[[ConfigT], Scorer]
    shorthand: str | None
    """Config field that a scalar shorthand (`- contains: refund`) fills, if any."""


_REGISTRY: dict[str, ScorerType[Any]] = {}


def scorer(
    name: str, config: type[ConfigT], *, shorthand: str | None = None
) -> Callable[[Callable[[ConfigT], Scorer]], Callable[[ConfigT], Scorer]]:
    """Register a scorer factory under `name`.

    Args:
        name: The key users write in suites (`contains`, `regex`, …).
        config: Pydantic model validating the scorer's full form.
        shorthand: The field a scalar shorthand fills; None when only the full form is allowed.
    """

    def register(factory: Callable[[ConfigT], Scorer]) -> Callable[[ConfigT], Scorer]:
        if name in _REGISTRY:
            raise ValueError(f"scorer {name!r} is registered twice")
        _REGISTRY[name] = ScorerType(name, config, factory, shorthand)
        return factory

    return register


def scorer_type(name: str) -> ScorerType[Any]:
    """Look up a registered scorer family, with a helpful error for unknown names."""
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ValueError(f"unknown scorer {name!r} (known: {known})") from None


def scorer_names() -> list[str]:
    """Names of every registered scorer, sorted."""
    return sorted(_REGISTRY)


def clamp(text: str, limit: int = LABEL_LIMIT) -> str:
    """Clamp a label to `limit` characters, marking the cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote(value: str, limit: int = 40) -> str:
    """Quote a configuration value for a label, shortened so labels stay short."""
    return '"' + clamp(value, limit) + '"'
