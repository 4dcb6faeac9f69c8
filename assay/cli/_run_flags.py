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
from functools import wraps
from types import UnionType
from typing import Annotated, Any, TypeVar, Union, get_args, get_origin, get_type_hints

import typer
from pydantic import ValidationError

from assay.cli import _common as common
from assay.runs.edges import COMMAND_LINE
from assay.runs.options import RunOptions, option_problem

Command = Callable[..., None]
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
    """Give `command` a flag for every field of `model` the command line derives; the command
    receives their values as `options` (field name → value)."""
    names = COMMAND_LINE.derived(model)

    def decorate(command: Command) -> Command:
        hints = get_type_hints(command, include_extras=True)
        own = [
            parameter.replace(annotation=hints[parameter.name])
            for parameter in inspect.signature(command).parameters.values()
            if parameter.name != OPTIONS_PARAMETER
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
            command(**values, **{OPTIONS_PARAMETER: options})

        parameters = [*own, *flags]
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
