"""The options of one suite run (and of a gate), with every bound in one place.

`RunOptions` is what the `suite-run` flow takes as its one parameter, so Prefect validates it on
every run, a deployment run included. Each field is declared once, here (or, for what every flow
takes, in `assay.choices`): every edge derives its parameters from the fields — the CLI's flags,
the service's request bodies, `AssayClient`, a nightly job (`assay.runs.edges`) — and
docs/configuration.md's table is `options_table`.
"""

from __future__ import annotations

from copy import copy
from typing import Annotated, Any, Final, Self, get_args

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo

from assay import help_texts
from assay.choices import JudgeChoice, NotificationChoice, StoreChoice
from assay.dask_reference import check_reference
from assay.errors import InputError
from assay.identifiers import MAX_IDENTIFIER_BYTES, Identifier
from assay.outputs.reference import OutputsReference

DEFAULT_CHUNK_SIZE: Final = 2000
MAX_CHUNK_SIZE: Final = 1_000_000
MAX_JUDGE_REPEATS: Final = 15
"""The most verdicts asked per check (as the JudgeSettings block allows)."""


def _location(value: Any) -> Any:
    """A plain string is a location (its format told by content), never a string to re-parse."""
    return {"location": value} if isinstance(value, str) else value


class RunOptions(StoreChoice, JudgeChoice, NotificationChoice):
    """One suite run: what to score, against what, where the evidence goes, how to judge."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    suite: str = Field(
        min_length=1,
        description="Suite file, or a published `NAME[@VERSION]` (latest when no version).",
    )
    outputs: Annotated[
        OutputsReference,
        # A deployment's parameters name outputs by a plain string too (its schema says so).
        BeforeValidator(_location, json_schema_input_type=OutputsReference | str),
    ] = Field(
        description="Where the candidate outputs are (JSONL or OTLP trace exports: a file, a "
        "folder or an `s3://` prefix) and how to read them; never their content.",
    )
    subject: str | None = Field(
        default=None,
        description="`KIND:ID[@VARIANT]`, e.g. `agent:bot@v2` (default: `agent:OUTPUTS-NAME`, "
        "the outputs file or folder name without its suffix).",
    )
    sample: int | None = Field(
        default=None, ge=1, description="Score only N cases, chosen reproducibly by the seed."
    )
    seed: int = Field(default=0, description="Seed that chooses the sampled cases.")
    baseline: Identifier | None = Field(
        default=None,
        description="Run id to compare with (default: the pinned baseline, else the latest "
        "comparable run).",
    )
    cross_suite: bool = Field(default=False, description=help_texts.CROSS_SUITE)
    chunk_size: int = Field(
        default=DEFAULT_CHUNK_SIZE,
        ge=1,
        le=MAX_CHUNK_SIZE,
        description=f"Cases per scoring chunk (default {DEFAULT_CHUNK_SIZE}).",
    )
    judge_repeats: int | None = Field(
        default=None,
        ge=1,
        le=MAX_JUDGE_REPEATS,
        description="Judge each `llm_judge` check K times: majority verdict, even split skipped, "
        "flip rate reported (default: the JudgeSettings block's, else 1).",
    )
    calibration: str | None = Field(
        default=None,
        description="Calibration set: add the PPI++ judge-corrected pass rate of the "
        "`llm_judge` checks (when it was calibrated for this run's judge), and the "
        "judge-corrected paired difference against the baseline, which then decides `regressed`.",
    )
    dask: str | None = Field(
        default=None,
        description="Score chunks on the Dask scheduler at ADDRESS (or `block:NAME`) "
        "(default: `$ASSAY_DASK_ADDRESS` where the flow runs).",
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        description="Score chunks on a temporary local Dask cluster of N worker processes.",
    )
    run_id: Identifier | None = Field(
        default=None,
        description="Record the run under this id (default: the flow run's id); with `resume`, "
        "the interrupted run to resume.",
    )
    resume: bool = Field(
        default=False,
        description="Re-run an interrupted run under its `run_id`, keeping its evidence; an "
        "unknown id is an error, not a new run.",
    )

    @field_validator("dask")
    @classmethod
    def _dask(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                check_reference(value)
            except InputError as exc:
                raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.resume and self.run_id is None:
            raise ValueError("resume needs the run_id of the run to resume")
        if self.dask and self.workers:
            raise ValueError("give a Dask cluster or a number of local workers, not both")
        return self


class GateOptions(RunOptions):
    """A gate: a suite run, and the limits of its verdict."""

    max_judge_flip_rate: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="Fail the gate when more than this share of checks flip across judge "
        "repeats (or the flip rate was not measured); no limit by default.",
    )

    def run(self) -> RunOptions:
        """The suite run's own options."""
        return RunOptions.model_validate(self.model_dump(exclude={"max_judge_flip_rate"}))


def option_field(name: str) -> Any:
    """A copy of an option's field (default, bounds, description), for a model that takes the
    option beside others (the service's what-if gate)."""
    return copy(GateOptions.model_fields[name])


def option_bounds(name: str) -> dict[str, Any]:
    """An option's bounds (`ge`, `le`) as `Field` takes them, for a setting that holds the same
    quantity (a JudgeSettings block's default `judge_repeats`)."""
    return {
        key: getattr(meta, key)
        for meta in GateOptions.model_fields[name].metadata
        for key in ("ge", "le")
        if getattr(meta, key, None) is not None
    }


def _bounds(info: FieldInfo) -> str:
    """An option's bounds as the docs table shows them."""
    limits = {
        key: getattr(meta, key)
        for meta in info.metadata
        for key in ("ge", "le")
        if getattr(meta, key, None) is not None
    }
    if "ge" in limits and "le" in limits:
        return f"{limits['ge']} to {limits['le']}"
    if "ge" in limits:
        return f"at least {limits['ge']}"
    if Identifier in get_args(info.annotation):
        return f"at most {MAX_IDENTIFIER_BYTES} bytes"
    return ""


def options_table(model: type[RunOptions] = GateOptions) -> str:
    """The Markdown table of every option, as docs/configuration.md holds it."""
    lines = ["| option | default | bounds | what it is |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        default = "required" if info.is_required() else f"`{info.get_default()!r}`"
        text = (info.description or "").replace("|", "\\|")
        lines.append(f"| `{name}` | {default} | {_bounds(info)} | {text} |")
    return "\n".join(lines)


def option_problem(exc: ValidationError, flag: str = "--{}") -> str:
    """One line for the first problem of options that failed validation, naming the option as
    `flag` spells it (`--judge-repeats` on the command line) and, for a bound, the range."""
    first = exc.errors(include_url=False)[0]
    field = str(first["loc"][0]) if first["loc"] else ""
    name = flag.format(field.replace("_", "-")) if field else "options"
    info = GateOptions.model_fields.get(field)
    bounds = {
        key: getattr(meta, key)
        for meta in (info.metadata if info else [])
        for key in ("ge", "le")
        if getattr(meta, key, None) is not None
    }
    given = first.get("input")
    if first["type"] in ("greater_than_equal", "less_than_equal") and bounds:
        if "le" in bounds:
            return f"{name} must be between {bounds.get('ge')} and {bounds['le']}, not {given}"
        return f"{name} must be at least {bounds['ge']}"
    return f"{name}: {first['msg'].removeprefix('Value error, ')}"
