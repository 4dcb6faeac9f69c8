"""The bodies of `POST /runs` and `POST /gate`, derived from the run options.

`RequestBody` holds what the service spells its own way (a published suite, a required subject,
outputs inline or by URI and their format); every other field of `RunOptions` (and, for the gate,
`GateOptions`) is added as declared there, bounds and description included, except those
`assay.runs.edges.SERVICE` refuses (a store, local paths, where chunks run), each with its reason
in docs/api.md. A new run option is in the OpenAPI schema with no edit here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from assay import schemes
from assay.intake import messages as message_lists
from assay.intake.conversation import MessagesError
from assay.outputs.candidate import CandidateOutput
from assay.outputs.reference import OutputsFormat, OutputsReference
from assay.runs.edges import SERVICE
from assay.runs.options import GateOptions, RunOptions
from assay.store import EvidenceStore
from assay.suites import registry

FlowName = Literal["suite-run", "gate"]


class RequestBody(BaseModel):
    """What every run request carries besides the run options: a published suite, a subject,
    and outputs inline or by URI (`RunRequest` and `GateRequest` add the options)."""

    model_config = ConfigDict(extra="forbid")

    suite: str = Field(description="A published suite, `NAME` (latest) or `NAME@VERSION`.")
    subject: str = Field(description="`KIND:ID[@VARIANT]`, e.g. `agent:support-bot@v2`.")
    outputs: list[CandidateOutput] | None = Field(
        default=None, description="Inline outputs: scored, never stored."
    )
    outputs_uri: str | None = Field(
        default=None,
        description="`s3://bucket/prefix`: every outputs object under it (JSON Lines, OTLP "
        "traces, transcripts; `?format=NAME` names the format, docs/records.md).",
    )
    outputs_format: OutputsFormat = Field(
        default="auto",
        description="How to read the outputs (`--outputs-format`): `auto` tells each file by "
        "its content; a message format (`openai-chat`, `openai-responses`, `anthropic`, "
        "`langchain`) is what inline outputs' `messages` must be in.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if (self.outputs is None) == (self.outputs_uri is None):
            raise ValueError("give exactly one of outputs (inline) and outputs_uri")
        named = self.outputs_format if self.outputs_format in message_lists.READERS else None
        for index, output in enumerate(self.outputs or []):
            try:
                output.case_id.encode()
                output.output.encode()
            except UnicodeEncodeError:
                # JSON lets `\ud800` through; it cannot be hashed, staged or scored as UTF-8.
                raise ValueError(
                    f"outputs[{index}]: not valid Unicode (a lone surrogate)"
                ) from None
            try:
                output.record = output.read_messages(named)
            except MessagesError as exc:
                raise ValueError(f"outputs[{index}].{exc.field}: {exc.problem}") from None
        return self

    def with_published_suite(self, store: EvidenceStore) -> Self:
        """This request with a suite *file* — which only the local service's own user may name
        — published (or recognised by its bytes, `registry.publish_or_resolve`) as `NAME@N`."""
        if not Path(self.suite).is_file():
            return self
        version, _ = registry.publish_or_resolve(store, self.suite)
        return self.model_copy(update={"suite": version.ref})

    def refuse_local_outputs(self) -> None:
        """InputError unless `outputs_uri` names a remote scheme: a service must not read its
        host's files on a caller's say-so (only the local service's own user may name them)."""
        if self.outputs_uri is not None:
            location = OutputsReference.parse(self.outputs_uri).location
            schemes.locate(location, schemes.REMOTE, "outputs_uri", paths=False)

    def options(
        self, store: EvidenceStore, outputs: str, flow: FlowName, run_id: str | None = None
    ) -> RunOptions:
        """The run's options: this request's, with the service's store, the outputs' reference
        (the S3 prefix, or the staged inline outputs) and the run id the service chose (an
        asynchronous run is named before its flow run exists)."""
        model = GateOptions if flow == "gate" else RunOptions
        reference = OutputsReference.parse(outputs)
        if self.outputs_format != "auto":
            reference.format = self.outputs_format
        return model(store=store.uri, outputs=reference, run_id=run_id, **self.chosen())

    def chosen(self) -> dict[str, Any]:
        """The run options this request names (its fields but the outputs)."""
        return self.model_dump(exclude={"outputs", "outputs_uri", "outputs_format"})

    def staged_bytes(self) -> bytes:
        """The inline outputs as JSON Lines, for the staging area."""
        assert self.outputs is not None
        return "\n".join(o.model_dump_json(exclude_none=True) for o in self.outputs).encode()


if TYPE_CHECKING:  # the models below are built at import; a type checker sees their base
    RunRequest = RequestBody
    GateRequest = RequestBody
else:
    RunRequest = SERVICE.model("RunRequest", RequestBody, RunOptions, "`POST /runs`: a suite run.")
    GateRequest = SERVICE.model(
        "GateRequest", RunRequest, GateOptions, "`POST /gate`: a suite run and its gate."
    )
