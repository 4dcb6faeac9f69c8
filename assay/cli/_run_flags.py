"""The run options as command-line flags, derived from `RunOptions` (`assay.runs.edges`).

`assay run` and `assay gate` declare only what the command line spells its own way (SUITE,
`--outputs`, `--resume`, `--json`, …); `run_option_flags` gives them one flag per other field of
their options model — `--field-name`, the field's description as its help, its default — so an
option added to `RunOptions` is a flag with no edit here. Bounds are the model's: a value out of
them is one line naming the flag (`run_options`), never a second copy of the bound.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from types import UnionType
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

import typer
from pydantic import ValidationError

from assay.cli import _common as common
from assay.cli._commands import DEFAULT_CASE_ATTRIBUTE
from assay.runs.edges import COMMAND_LINE
from assay.runs.options import RunOptions, option_problem

if TYPE_CHECKING:
    from assay.outputs.reference import OutputsReference

Command = Callable[..., None]
PlanOption = Annotated[
    bool,
    typer.Option(
        "--plan",
        help="Show what the run would ask its judge and spend — calls after verdict-cache hits, "
        "tokens, cost sync and batch, each budget's headroom, whether it would be blocked — "
        "without calling a judge or writing anything.",
    ),
]


@dataclass(frozen=True)
class RunFlags:
    """What `assay run` and `assay gate` both take besides the run options, declared once: how
    the outputs are read, a resume, JSON, where the run happens, a plan instead of the run."""

    outputs_format: str
    case_attribute: str
    resume: str | None
    as_json: bool
    server: str | None
    local: bool
    plan: bool

    def reference(self, outputs: str) -> OutputsReference:
        """The outputs the run reads, with the format and case attribute given."""
        return common.outputs_reference(outputs, self.outputs_format, self.case_attribute)

    def endpoint(self, store: str | None) -> common.Endpoint | None:
        """The service the run goes through (started for a person at a terminal, not for a
        plan), else None: here."""
        return common.service(self.server, store, local=self.local, start=not self.plan)

    def chosen(
        self, options: dict[str, Any], suite: str, reference: OutputsReference
    ) -> dict[str, Any]:
        """The run's options as given here: the flags' values, the suite, the outputs, a resume."""
        resume = {"run_id": self.resume, "resume": bool(self.resume)}
        return dict(options, suite=suite, outputs=reference, **resume)


_RUN_FLAGS: tuple[tuple[str, Any, Any], ...] = (
    ("outputs_format", common.OutputsFormatOption, "auto"),
    ("case_attribute", common.CaseAttributeOption, DEFAULT_CASE_ATTRIBUTE),
    ("resume", common.ResumeOption, None),
    ("as_json", common.JsonOption, False),
    ("server", common.ServerOption, None),
    ("local", common.LocalOption, False),
    ("plan", PlanOption, False),
)
FLAGS_PARAMETER = "flags"
"""The command's parameter that receives the `RunFlags`."""
Options = TypeVar("Options", bound=RunOptions)
OPTIONS_PARAMETER = "options"
"""The command's parameter that receives the derived flags' values, by field name."""


def flag(name: str) -> str:
    """A field's flag: `judge_repeats` → `--judge-repeats`."""
    return "--" + name.replace("_", "-")


def _plain(annotation: Any) -> Any:
    """The type Typer parses a field's value as: constraints (`Identifier`) are the model's."""
    if get_origin(annotation) is Annotated:
        return get_args(annotation)[0]
    if get_origin(annotation) in (Union, UnionType):
        members = tuple(_plain(member) for member in get_args(annotation))
        return Union[members]  # noqa: UP007  (built from a tuple)
    return annotation


def run_option_flags(model: type[RunOptions]) -> Callable[[Command], Command]:
    """Give `command` the `RunFlags` (as `flags`) and a flag for every field of `model` the
    command line derives (their values as `options`, field name → value)."""
    names = COMMAND_LINE.derived(model)

    def decorate(command: Command) -> Command:
        hints = get_type_hints(command, include_extras=True)
        own = [
            parameter.replace(annotation=hints[parameter.name])
            for parameter in inspect.signature(command).parameters.values()
            if parameter.name not in (OPTIONS_PARAMETER, FLAGS_PARAMETER)
        ]
        shared = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=kind
            )
            for name, kind, default in _RUN_FLAGS
        ]
        flags = [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=model.model_fields[name].get_default(),
                annotation=Annotated[
                    _plain(model.model_fields[name].annotation),
                    typer.Option(
                        flag(name),
                        help=common.flag_help(model.model_fields[name].description or ""),
                    ),
                ],
            )
            for name in names
        ]

        @wraps(command)
        def with_flags(**values: Any) -> None:
            options = {name: values.pop(name) for name in names}
            given = RunFlags(**{name: values.pop(name) for name, _, _ in _RUN_FLAGS})
            command(**values, **{OPTIONS_PARAMETER: options, FLAGS_PARAMETER: given})

        parameters = [*own, *shared, *flags]
        with_flags.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
        with_flags.__annotations__ = {p.name: p.annotation for p in parameters}
        return with_flags

    return decorate


def run_options(model: type[Options], **values: Any) -> Options:
    """The options of a run (or gate) from the command line's; a value out of bounds exits 2
    with one line naming its flag."""
    try:
        return model(**values)
    except ValidationError as exc:
        common.fail(option_problem(exc))
