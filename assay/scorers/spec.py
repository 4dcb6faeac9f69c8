"""How a scorer is written in a suite, and its one canonical form.

Users write either the shorthand (`- contains: refund`, `- json_valid`) or the full form
(`- contains: {value: refund, case_sensitive: false}`). Both validate to the same `ScorerSpec`,
whose canonical form is always the full form with defaults filled in — so rewriting a suite from
shorthand to full form does not change its content hash.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    ModelWrapValidatorHandler,
    SerializeAsAny,
    ValidationError,
    model_serializer,
    model_validator,
)

from assay.process_state import remembered
from assay.scorers._registry import Scorer, ScorerConfig, scorer_type
from assay.trajectory import Trajectory

_SPEC_CACHE_SIZE = 65_536
_SPECS: dict[str, ScorerSpec] = {}
_FIELD_SETS: dict[frozenset[str], set[str]] = {}
remembered(__name__, "_SPECS", _SPECS.clear)
remembered(__name__, "_FIELD_SETS", _FIELD_SETS.clear)


def share_fields_set(model: BaseModel) -> None:
    """Give a frozen model the one shared copy of its set of explicitly given fields.

    pydantic gives every instance a set of its own (`model_fields_set`: 216 bytes for two or
    three fields, 728 for a case's six), which at 100,000 cases, each with its own
    `numeric_range` spec and config, was a quarter of the suite's memory. A frozen model never
    changes its set (pydantic refuses the assignment first, and `model_copy` copies the set), so
    equal sets can be one object.
    """
    fields = model.__pydantic_fields_set__
    shared = _FIELD_SETS.setdefault(frozenset(fields), fields)
    if shared is not fields:
        object.__setattr__(model, "__pydantic_fields_set__", shared)


def _describe(error: ValidationError, name: str) -> str:
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        where = ".".join(str(p) for p in (name, *item["loc"]))
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


class ScorerSpec(BaseModel):
    """One scorer as configured on a case or in a suite's defaults."""

    model_config = ConfigDict(frozen=True, ignored_types=(cached_property,))

    name: str
    config: SerializeAsAny[ScorerConfig]

    @model_validator(mode="wrap")
    @classmethod
    def _shared(cls, raw: Any, handler: ModelWrapValidatorHandler[ScorerSpec]) -> ScorerSpec:
        """Identical scorer entries validate to one shared, immutable spec.

        A 100,000-case suite repeats the same few scorers many times: sharing them saves the
        validation, the memory, and the compilation of each repeat.
        """
        if isinstance(raw, ScorerSpec):
            return raw
        # The entry is plain data as parsed from YAML/JSON, so its `repr` is its identity: it
        # keeps `True`, `1` and `1.0` apart, and a string's quotes apart from a mapping's braces.
        key = repr(raw)
        spec = _SPECS.get(key)
        if spec is None:
            spec = handler(raw)
            share_fields_set(spec)
            share_fields_set(spec.config)
            if len(_SPECS) >= _SPEC_CACHE_SIZE:
                _SPECS.clear()
            _SPECS[key] = spec
        return spec

    @model_validator(mode="before")
    @classmethod
    def _parse(cls, raw: Any) -> Any:
        if isinstance(raw, str):
            name, value = raw, None
        elif isinstance(raw, dict) and len(raw) == 1:
            ((name, value),) = raw.items()
        else:
            raise ValueError("write a scorer as `- name: value` or `- name: {option: value}`")
        kind = scorer_type(str(name))
        if value is None:
            options: dict[str, Any] = {}
        elif isinstance(value, dict):
            options = value
        elif kind.shorthand is not None:
            options = {kind.shorthand: value}
        else:
            raise ValueError(f"scorer {name!r} takes its options as a mapping, e.g. {{value: ...}}")
        try:
            config = kind.config.model_validate(options)
        except ValidationError as exc:
            raise ValueError(_describe(exc, str(name))) from None
        return {"name": name, "config": config}

    @model_serializer
    def _serialize(self) -> dict[str, Any]:
        return self.full_form

    @cached_property
    def full_form(self) -> dict[str, Any]:
        """`{name: {option: value, ...}}` with defaults filled: how the spec is stored.

        Specs are immutable and shared across cases, so each is dumped once. Treat as read-only.
        """
        return {self.name: self.config.model_dump(mode="json")}

    @cached_property
    def key(self) -> str:
        """Identity of this scorer's full form: equal keys mean equal scorers."""
        return f"{self.name}:{self.config.model_dump_json()}"

    @property  # not cached: a dict lookup beats 3.11's locked first read, once per per-case spec
    def needs_reference(self) -> bool:
        """Whether this check compares with the case's `expected_trajectory`."""
        return scorer_type(self.name).needs_reference

    def build(self, reference: Trajectory | None = None) -> Scorer:
        """Compile this spec into a callable scorer (with the case's reference trajectory, for
        a check that `needs_reference`)."""
        built: Scorer = scorer_type(self.name).build(self.config, reference)
        return built
