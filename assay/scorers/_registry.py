"""Scorer registry: one decorator, one lookup, one way to parse a scorer spec.

A scorer family registers a pydantic config model and a factory. The factory runs once per
distinct configuration (when a suite is compiled) and returns a callable that scores one output.
A family that compares the output with the case's reference trajectory (`reference_scorer`)
runs once per case instead, with that case's `expected_trajectory` bound in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from assay.intake.record import Evidence
from assay.trajectory import Trajectory

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


UNAVAILABLE: Final = "unavailable: "
"""How the reason of a check whose evidence the record did not capture begins."""
TEXT_ONLY: Final = frozenset({Evidence.TEXT})


@dataclass(frozen=True, slots=True)
class Observation:
    """What a scorer looks at: the output's final text and, when the output carries one, the
    tool-call trajectory the agent made (None: the output does not say what it did), and what
    the record could not show (`assay.intake.record`), with why."""

    text: str
    trajectory: Trajectory | None = None
    unseen: Mapping[Evidence, str] = field(default_factory=dict)
    turns: int = 1
    """How many turns the record holds (its user messages; one for a one-answer record)."""


class Scorer:
    """A compiled scorer: its name, a redacted label of its configuration, and its check."""

    __slots__ = ("label", "name", "needs", "observe")

    def __init__(
        self,
        name: str,
        label: str,
        check: Callable[[str], Outcome] | None = None,
        *,
        observe: Callable[[Observation], Outcome] | None = None,
        needs: frozenset[Evidence] = TEXT_ONLY,
    ) -> None:
        """A scorer of the output's text (`check`), or of the whole observation (`observe`),
        which needs the evidence `needs` (a record that did not capture it makes the check
        unavailable: skipped, against coverage, never a pass)."""
        self.name = name
        self.label = clamp(label)
        self.needs = needs
        if observe is None:
            if check is None:
                raise TypeError("a scorer needs a check or an observe function")
            observe = _of_text(check)
        self.observe = observe

    def __call__(self, output: str | Observation) -> Outcome:
        observed = output if isinstance(output, Observation) else Observation(output)
        if observed.unseen:
            for evidence in self.needs:
                why = observed.unseen.get(evidence)
                if why is not None:
                    return Outcome(Status.SKIPPED, 0.0, UNAVAILABLE + why)
        try:
            return self.observe(observed)
        except Exception as exc:  # a scorer bug must not sink the run, nor pass the case
            return Outcome(Status.ERROR, 0.0, f"scorer error ({type(exc).__name__})")


def _of_text(check: Callable[[str], Outcome]) -> Callable[[Observation], Outcome]:
    return lambda observed: check(observed.text)


@dataclass(frozen=True)
class ScorerType(Generic[ConfigT]):
    """A registered scorer family."""

    name: str
    config: type[ConfigT]
    build: Callable[[ConfigT, Trajectory | None], Scorer]
    shorthand: str | None
    """Config field that a scalar shorthand (`- contains: refund`) fills, if any."""
    needs_reference: bool = False
    """Whether the check compares with the case's `expected_trajectory` (built per case)."""


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
        _register(ScorerType(name, config, lambda built, _: factory(built), shorthand))
        return factory

    return register


def reference_scorer(
    name: str, config: type[ConfigT], *, shorthand: str | None = None
) -> Callable[[Callable[[ConfigT, Trajectory], Scorer]], Callable[[ConfigT, Trajectory], Scorer]]:
    """Register a factory that also takes the case's reference trajectory (built per case)."""

    def register(
        factory: Callable[[ConfigT, Trajectory], Scorer],
    ) -> Callable[[ConfigT, Trajectory], Scorer]:
        def build(built: ConfigT, reference: Trajectory | None) -> Scorer:
            if reference is None:
                raise ValueError(f"scorer {name!r} needs the case's expected_trajectory")
            return factory(built, reference)

        _register(ScorerType(name, config, build, shorthand, needs_reference=True))
        return factory

    return register


def _register(kind: ScorerType[Any]) -> None:
    if kind.name in _REGISTRY:
        raise ValueError(f"scorer {kind.name!r} is registered twice")
    _REGISTRY[kind.name] = kind


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
