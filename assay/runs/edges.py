"""How each edge exposes a run's options: derived from `RunOptions`, with what it refuses and why.

An option is declared once, as a field of `RunOptions` (or `GateOptions`): its name, type,
default, bounds and description. Every edge that starts runs — the command line's `assay run` and
`assay gate`, the service's `POST /runs` and `POST /gate` (and so `AssayClient`), a nightly job —
derives its parameters from those fields. An edge only *declares* the fields it spells its own
way (`own`: the command line's positional SUITE) and the ones it refuses, each with the reason a
user is told; every other field appears there by itself, so a new option needs no edit here.
`tests/test_run_option_edges.py` checks that each edge exposes every field or says why not.
"""

from __future__ import annotations

from collections.abc import Mapping
from copy import copy
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from pydantic import BaseModel, create_model

from assay.runs.options import RunOptions

Base = TypeVar("Base", bound=BaseModel)


@dataclass(frozen=True)
class Exposure:
    """One edge's view of the run options.

    Attributes:
        edge: The edge, as a user names it (`assay run`, `POST /runs`, a nightly job).
        own: Fields the edge spells its own way, and how (never derived).
        refused: Fields the edge does not take, and why (the line a user reads).
    """

    edge: str
    own: Mapping[str, str] = field(default_factory=dict)
    refused: Mapping[str, str] = field(default_factory=dict)

    def derived(self, model: type[RunOptions], below: type[BaseModel] | None = None) -> list[str]:
        """The fields of `model` this edge takes as they are declared, in `--help` order: the
        suite run's own fields, then what it shares with every flow (store, judge, findings),
        then a gate's. With `below`, only the fields `below` does not have already."""
        unknown = sorted({*self.own, *self.refused} - set(model.model_fields))
        if unknown and below is None:
            raise ValueError(f"{self.edge} names options RunOptions lacks: {', '.join(unknown)}")
        names = [
            name
            for name in model.model_fields
            if name not in self.own
            and name not in self.refused
            and (below is None or name not in below.model_fields)
        ]
        primary = set(RunOptions.__annotations__)
        return sorted(names, key=lambda name: name not in primary)

    def fields(
        self, model: type[RunOptions], below: type[BaseModel] | None = None
    ) -> dict[str, Any]:
        """The derived fields as `pydantic.create_model` takes them: a copy of each field."""
        return {
            name: (model.model_fields[name].annotation, copy(model.model_fields[name]))
            for name in self.derived(model, below)
        }

    def model(
        self,
        name: str,
        base: type[Base],
        options: type[RunOptions],
        doc: str | None = None,
    ) -> type[Base]:
        """`base` (the edge's own fields and checks) with every derived option of `options`
        added: a request body, a nightly job."""
        return create_model(
            name,
            __base__=base,
            __module__=base.__module__,
            __doc__=doc or base.__doc__,
            **self.fields(options, below=base),
        )


COMMAND_LINE: Final = Exposure(
    "assay run / assay gate",
    own={
        "suite": "the SUITE argument",
        "outputs": "--outputs PATH with --outputs-format and --case-attribute",
        "run_id": "--resume RUN_ID names the run to resume",
        "resume": "--resume RUN_ID",
    },
)
SERVICE: Final = Exposure(
    "POST /runs and POST /gate",
    own={
        "suite": "`suite`: a published suite only (publish a file with POST /suites)",
        "outputs": "`outputs` inline, or `outputs_uri`, with `outputs_format`",
        "subject": "`subject`, required (the service cannot name outputs it was sent)",
    },
    refused={
        "store": "the service keeps evidence in its own store",
        "storage_block": "the service keeps evidence in its own store",
        "calibration": "a calibration set is a path on the caller's machine",
        "dask": "where the service scores chunks is its own setting",
        "workers": "where the service scores chunks is its own setting",
        "run_id": "the service names its runs (a run is named before it starts)",
        "resume": "the service resumes its own interrupted runs",
    },
)
NIGHTLY_JOB: Final = Exposure(
    "a nightly job",
    own={
        "suite": "`suite`: a file in the repo or a published NAME[@VERSION]",
        "outputs": "`outputs`: where the job's outputs are dropped",
        "subject": "`subject`, required (each job is one subject)",
    },
    refused={
        "store": "every job keeps evidence in the nightly flow's store",
        "storage_block": "every job keeps evidence in the nightly flow's store",
        "run_id": "each night's job is a new run",
        "resume": "each night's job is a new run (its idempotency key starts it once)",
    },
)
EXPOSURES: Final = (COMMAND_LINE, SERVICE, NIGHTLY_JOB)
