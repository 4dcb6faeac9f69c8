"""Suites: the versioned golden data set — loading, validation and content addressing.

A suite file (YAML or JSON) validates to a `Suite`. Every error names the file, the line and the
field, so a user can fix a 10,000-case file without hunting.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from assay.canonical import canonical_json, content_hash, text_hash
from assay.documents import field_path, line_of, parse_document, read_text
from assay.errors import InputError, shown
from assay.gcpause import gc_paused, kept_long
from assay.scorers import ScorerSpec, share_fields_set
from assay.trajectory import ExpectedStep, Trajectory, bare_single_calls, reference_trajectory

SLUG = r"^[a-z0-9][a-z0-9-]*$"
CASE_ID = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"

MAX_NAME_CHARS = 64
"""The longest suite name (and other slugs): a suite name is a segment of its store keys."""

Slug = Annotated[str, Field(pattern=SLUG, max_length=MAX_NAME_CHARS)]
Fraction = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]

DEFAULT_MIN_COVERAGE = 0.95
"""Scored cases / cases a run needs before its pass rate counts (see `assay.scoring`)."""

_ADDED_FIELDS: dict[str, object] = {
    "min_coverage": DEFAULT_MIN_COVERAGE,
    "trials": None,
    "non_inferiority_margin": None,
    "primary_comparison": False,
}
"""Suite fields added after suites were first published, with their defaults. At its default a
field is left out of the canonical text, so every suite published before the field existed keeps
its content address (and republishing it stays a no-op); set to anything else, it is part of it."""

ALL_TURNS: Final[Literal["all_turns"]] = "all_turns"
"""The default verdict policy of a conversation case: every turn passes."""

_ADDED_CASE_FIELDS: dict[str, object] = {
    "expected_trajectory": None,
    "cluster": None,
    "turns": None,
    "conversation_passes": ALL_TURNS,
}
"""Case fields added after cases were first published, with their defaults: left out of a case's
dump (and so of its canonical document) at their default, for the same reason."""


class TurnSpec(BaseModel):
    """One turn of a conversation case: what a one-answer case carries, for that turn's answer
    and the tool calls of that turn only (docs/conversations.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,))

    expected: str | None = None
    scorers: list[ScorerSpec] = Field(default_factory=list)
    """The turn's checks; a turn that lists none takes the suite's `defaults`."""
    expected_trajectory: list[ExpectedStep] | None = None
    """The tool calls the agent should make in this turn, in order."""
    tags: list[str] = Field(default_factory=list)

    @field_validator("expected_trajectory")
    @classmethod
    def _canonical_steps(cls, steps: list[ExpectedStep] | None) -> list[ExpectedStep] | None:
        return None if steps is None else bare_single_calls(steps)

    @model_validator(mode="after")
    def _shared_fields_set(self) -> TurnSpec:
        share_fields_set(self)
        return self

    @cached_property
    def reference(self) -> Trajectory | None:
        """`expected_trajectory` as the trajectory checks compare with (None without one)."""
        steps = self.expected_trajectory
        return None if steps is None else reference_trajectory(steps)


class MeanAtLeast(BaseModel):
    """A conversation passes when the mean of its turns' scores is at least this."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mean_at_least: Fraction


class MinAtLeast(BaseModel):
    """A conversation passes when every turn's score is at least this."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_at_least: Fraction


ConversationPasses = Literal["all_turns", "final_turn"] | MeanAtLeast | MinAtLeast
""" How a conversation case is decided from its turns (`assay.runs.conversations`)."""


class Case(BaseModel):
    """One golden case: an input, optional ground truth, and the scorers that judge outputs."""

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,))

    id: Annotated[str, Field(pattern=CASE_ID, max_length=200)]
    input: str
    expected: str | None = None
    query_class: str | None = None
    tags: list[str] = Field(default_factory=list)
    scorers: list[ScorerSpec] = Field(default_factory=list)
    expected_trajectory: list[ExpectedStep] | None = None
    """The tool calls the agent should make, in order; a nested list is one parallel step."""
    cluster: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Cases that are not independent (questions about one document, one customer, one tool)
    share a cluster: the run then reports the cluster-robust interval (`clustered`)."""
    turns: Annotated[list[TurnSpec], Field(min_length=1)] | None = None
    """A conversation: turn j of the record is scored against turn j here, and the case's own
    `scorers` are checks of the whole conversation (docs/conversations.md)."""
    conversation_passes: ConversationPasses = ALL_TURNS
    """How the turns decide the case: `all_turns`, `final_turn`, `{mean_at_least: x}` or
    `{min_at_least: x}` (turn scores, 0–1)."""

    @field_validator("expected_trajectory")
    @classmethod
    def _canonical_steps(cls, steps: list[ExpectedStep] | None) -> list[ExpectedStep] | None:
        return None if steps is None else bare_single_calls(steps)

    @model_validator(mode="after")
    def _shared_fields_set(self) -> Case:
        share_fields_set(self)
        return self

    @model_validator(mode="after")
    def _policy_needs_turns(self) -> Case:
        if self.turns is None and self.conversation_passes != ALL_TURNS:
            raise ValueError("conversation_passes needs the case's turns")
        return self

    @model_serializer(mode="wrap")
    def _without_unset_added_fields(self, handler: SerializerFunctionWrapHandler) -> Any:
        dumped = handler(self)
        for name, default in _ADDED_CASE_FIELDS.items():
            if isinstance(dumped, dict) and name in dumped and dumped[name] == default:
                del dumped[name]
        return dumped

    def document(self) -> dict[str, Any]:
        """The canonical document of this case (full-form scorers)."""
        document = self.model_dump(mode="json", exclude={"scorers"})
        document["scorers"] = [spec.full_form for spec in self.scorers]
        return document

    @cached_property
    def reference(self) -> Trajectory | None:
        """`expected_trajectory` as the trajectory checks compare with (None without one)."""
        steps = self.expected_trajectory
        return None if steps is None else reference_trajectory(steps)

    @cached_property
    def content_hash(self) -> str:
        """Content address of this case (canonical JSON of its full form)."""
        return content_hash(self.document())


CasePasses = Literal["all", "majority", "any"]


_CASES = TypeAdapter(list[Case])


class TrialsPolicy(BaseModel):
    """How a suite treats repeated trials of a case (outputs records with `trial`).

    A case passes when `case_passes` of its scored trials passed — `all` of them, a strict
    `majority` (more than half), or `any` — and it has at least `min` scored trials; fewer is a
    coverage shortfall (the case is incomplete), never a pass. A case fails as soon as the
    trials it has settle it whatever the missing ones would say (under `all`, one failed trial).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    min: Annotated[int, Field(ge=1, le=1000)] = 1
    case_passes: CasePasses = "all"


@dataclass(frozen=True)
class CanonicalSuite:
    """A suite's canonical JSON text, its content hash, and each case's content hash by id."""

    text: str
    content_hash: str
    case_hashes: dict[str, str]


class Suite(BaseModel):
    """A golden suite: cases, default scorers and the thresholds a run is held to."""

    model_config = ConfigDict(frozen=True, extra="forbid", ignored_types=(cached_property,))

    suite: Slug
    description: str = ""
    pass_threshold: Fraction = 0.8
    regression_threshold: Fraction = 0.05
    min_coverage: Fraction = DEFAULT_MIN_COVERAGE
    """A run passes only when scored cases / cases reaches this, before its pass rate counts."""
    trials: TrialsPolicy | None = None
    """Repeated trials per case: how many at least, and how they decide the case."""
    non_inferiority_margin: (
        Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False, strict=True)] | None
    ) = None
    """δ: the gate passes only when the upper 95% bound of the pass-rate drop against the
    baseline is below δ (`insufficient_evidence` when it is not, and the run did not regress)."""
    primary_comparison: bool = False
    """A pre-registered primary comparison: a nightly keeps this suite's regression test out of
    the family it adjusts for multiplicity and decides it at 5% alone (`assay.multiplicity`)."""
    defaults: list[ScorerSpec] = Field(default_factory=list)
    cases: list[Case]

    @field_validator("cases")
    @classmethod
    def _not_empty(cls, cases: list[Case]) -> list[Case]:
        if not cases:
            raise ValueError("the suite has no cases")
        return cases

    def document(self) -> dict[str, Any]:
        """The canonical document of this suite (full-form scorers, defaults filled).

        Equal to `model_dump(mode="json")`, assembled by hand because shared scorer specs are
        dumped once each instead of once per case (5x faster on a 100,000-case suite).
        """
        document = self.model_dump(mode="json", exclude={"defaults", "cases"})
        document["defaults"] = [spec.full_form for spec in self.defaults]
        document["cases"] = [case.document() for case in self.cases]
        return document

    @cached_property
    def canonical(self) -> CanonicalSuite:
        """Canonical text and content addresses, computed from one dump of the suite."""
        with gc_paused():
            document = self.document()
            case_texts = [canonical_json(case) for case in document["cases"]]
            # With sorted keys "cases" is the first key, so the suite's canonical text is the
            # cases' canonical texts spliced into the rest: each case is serialised once.
            rest_document = {**document, "cases": []}
            for name, default in _ADDED_FIELDS.items():
                if rest_document[name] == default:
                    del rest_document[name]
            rest = canonical_json(rest_document).removeprefix('{"cases":[]')
            text = '{"cases":[' + ",".join(case_texts) + "]" + rest
            return CanonicalSuite(
                text=text,
                content_hash=text_hash(text),
                case_hashes={
                    case["id"]: text_hash(case_text)
                    for case, case_text in zip(document["cases"], case_texts, strict=True)
                },
            )

    @property
    def content_hash(self) -> str:
        """Content address of the whole suite; identical content means an identical hash."""
        return self.canonical.content_hash

    def scorers_for(self, case: Case) -> list[ScorerSpec]:
        """The scorers that judge `case`: its own, or the suite defaults when it lists none. A
        conversation case's are its conversation-level checks: its own only (the defaults are
        a turn's, `turn_scorers`)."""
        if case.turns is not None:
            return case.scorers
        return case.scorers or self.defaults

    def turn_scorers(self, turn: TurnSpec) -> list[ScorerSpec]:
        """The scorers that judge one turn of a conversation case: its own, or the defaults."""
        return turn.scorers or self.defaults


def _case_id_at(raw: Any, loc: tuple[str | int, ...]) -> str | None:
    if len(loc) >= 2 and loc[0] == "cases" and isinstance(loc[1], int) and isinstance(raw, dict):
        cases = raw.get("cases")
        if isinstance(cases, list) and loc[1] < len(cases) and isinstance(cases[loc[1]], dict):
            case_id = cases[loc[1]].get("id")
            return str(case_id) if case_id is not None else None
    return None


_CANONICAL_OPENING = '{"cases":['
"""How a canonical suite text begins: with sorted keys, `cases` is its first key."""
_CANONICAL_REST = '],"defaults":'
"""Where its cases end: `defaults` (always there) is the next key."""
_CASE_START = re.compile(r'\},(?=\{"(?:cluster|conversation_passes|expected)":)')
"""The end of one canonical case and the comma before the next (see `_decoded_by_batch`); a
conversation's turns begin with `expected` too, so a cut may fall between two turns: see there."""
_CASE_BATCH = 1_000


def load_published(data: bytes, digest: str, source: str) -> Suite:
    """A published suite from its canonical text, checked against its content address.

    The text is what `publish` wrote after `parse_suite` accepted the suite, so once its digest
    matches, it is validated as it is decoded (`_decoded_by_batch`): the file-and-line checks of
    `parse_suite` (duplicate keys, duplicate case ids, cases without scorers) held when it was
    published, and no hash of the parsed suite is needed. A text that no longer validates (a
    suite published by another version of Assay) is reported by `parse_suite`, naming line and
    field.

    Raises:
        InputError: the stored text does not match its address, or does not validate.
    """
    if "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise InputError(source, f"the stored suite does not match its address {digest}")
    text = data.decode("utf-8")
    try:
        with kept_long():  # a published suite is cached for the process (`registry.resolve`)
            return _decoded_by_batch(text)
    except (ValueError, IndexError):  # a ValidationError is a ValueError too
        return parse_suite(text, source)


def _decoded_by_batch(text: str) -> Suite:
    """Validate canonical suite text a batch of cases at a time, each batch from its JSON text.

    Validating the whole text in one call (`Suite.model_validate_json`) first parsed all of it
    into a JSON tree as large again as the validated suite: at 100,000 cases the client's peak
    was that tree, not the suite. Here only one batch's text is parsed at a time, by pydantic
    from JSON (decoding each case with `json` first took twice as long). A canonical case begins
    with its first key in sorted order, `cluster` or else `expected` (always there), so the
    cases are cut where `},{"cluster":`, `},{"conversation_passes":` or `},{"expected":` follow
    one another. A cut in the wrong place — those characters inside a case's own data, or
    between two turns of a conversation (a turn begins with `expected` too) — matters only where
    a batch ends (the cases between are parsed together): there it leaves text that is not JSON
    or not a case, raises, and the caller falls back to `parse_suite` (the same suite, slower).
    """
    end = text.rfind(_CANONICAL_REST)
    if not text.startswith(_CANONICAL_OPENING) or end < 0:
        raise ValueError("not canonical suite text")
    first = len(_CANONICAL_OPENING)
    commas = [match.start() + 1 for match in _CASE_START.finditer(text, first, end)]
    starts, ends = [first, *(comma + 1 for comma in commas)], [*commas, end]
    cases: list[Case] = []
    for batch in range(0, len(starts), _CASE_BATCH):
        last = min(batch + _CASE_BATCH, len(starts)) - 1
        cases += _CASES.validate_json(f"[{text[starts[batch] : ends[last]]}]")
    rest = json.loads("{" + text[end + len("],") :])  # the suite's other fields
    return Suite.model_validate({**rest, "cases": cases})


def parse_suite(text: str, source: str) -> Suite:
    """Validate suite text; raise `InputError` naming source, line and field on any problem."""
    with gc_paused():
        raw = parse_document(text, source)
    if not isinstance(raw, dict):
        raise InputError(source, "a suite must be a mapping with `suite` and `cases`", line=1)
    try:
        with gc_paused():
            suite = Suite.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        loc = tuple(first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        case_id = _case_id_at(raw, loc)
        if case_id is not None:
            message = f"case {shown(case_id)}: {message}"
        more = exc.error_count() - 1
        if more:
            message += f" (and {more} more problem{'s' if more > 1 else ''})"
        line = line_of(text, loc, source.endswith(".json"))
        raise InputError(source, message, line=line, field=field_path(loc) or None) from None
    seen: dict[str, int] = {}
    for index, case in enumerate(suite.cases):
        if case.id in seen:
            raise InputError(
                source,
                f"duplicate case id {shown(case.id)} (first at cases[{seen[case.id]}])",
                line=line_of(text, ("cases", index, "id"), source.endswith(".json")),
                field=f"cases[{index}].id",
            )
        seen[case.id] = index
        json_text = source.endswith(".json")
        at: tuple[str | int, ...] = ("cases", index)
        if case.turns is None and not case.scorers and not suite.defaults:
            raise InputError(
                source,
                f"case {shown(case.id)} lists no scorers and the suite has no defaults",
                line=line_of(text, at, json_text),
                field=f"cases[{index}].scorers",
            )
        checked = [(at, "case", suite.scorers_for(case), case.expected_trajectory)]
        for number, turn in enumerate(case.turns or ()):
            turn_at = (*at, "turns", number)
            if not suite.turn_scorers(turn):
                raise InputError(
                    source,
                    f"case {shown(case.id)}: turn {number + 1} lists no scorers and the suite"
                    " has no defaults",
                    line=line_of(text, turn_at, json_text),
                    field=field_path((*turn_at, "scorers")),
                )
            checked.append((turn_at, "turn", suite.turn_scorers(turn), turn.expected_trajectory))
        for where, holder, scorers, reference in checked:
            referenced = [spec.name for spec in scorers if spec.needs_reference]
            if referenced and reference is None:
                raise InputError(
                    source,
                    f"case {shown(case.id)}: check {referenced[0]} needs the {holder}'s"
                    " expected_trajectory",
                    line=line_of(text, where, json_text),
                    field=field_path((*where, "expected_trajectory")),
                )
    return suite


SUITE_SUFFIXES = (".yaml", ".yml", ".json")


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file (`.yaml`, `.yml` or `.json`)."""
    return parse_suite(read_text(path), str(path))
