"""The command line as a client of `assay serve`: with `--server URL` or `$ASSAY_URL`,
`assay run`, `assay gate` and `assay runs …` call the service through `assay.client` instead
of starting flows in this process — a CI job needs the URL and `$ASSAY_TOKEN`, not the store's
credentials, and no Prefect is imported.

A suite file is published first (`POST /suites`); local outputs (a JSON Lines file or a folder
of them) are sent inline and validated by the service; an `s3://` prefix is sent as
`outputs_uri` and read with the service's credentials. Options that only make sense in this
process (`--store`, `--resume`, `--dask`, …) are refused in one line.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from assay import schemes
from assay.answers import AssayAPIError, validated
from assay.cli import _common as common
from assay.cli._commands import DEFAULT_CASE_ATTRIBUTE
from assay.cli._common import Endpoint
from assay.client import AssayClient
from assay.preload import preload

if TYPE_CHECKING:
    from assay.findings import Finding
    from assay.gate.decision import GateReport
    from assay.gate.overrides import GateCheck
    from assay.outputs.reference import OutputsReference
    from assay.runs.cases import CaseFilter, CaseResult
    from assay.runs.cost_plan import CostPlan
    from assay.runs.options import RunOptions
    from assay.runs.records import EvalResult, RunAggregate, RunState
    from assay.runs.scorecard import ScorecardRow

T = TypeVar("T")


def sendable(
    endpoint: Endpoint,
    model: type[RunOptions],
    options: Mapping[str, Any],
    reference: OutputsReference,
    **here_only: object,
) -> dict[str, Any] | None:
    """The run options to send `endpoint` (those not at their default), or None when the run
    must happen in this process instead: an option the service does not take (`here_only`:
    command-line options such as `--resume`, `--junit`; the run options
    `assay.runs.edges.SERVICE` refuses) is one line and exit 2 for a remote service, and sends
    a run on the local service back here. A remote service is sent local outputs inline as JSON
    Lines, so another `--outputs-format` or `--case-attribute` is refused too."""
    from assay.runs.edges import SERVICE

    given = {
        name: value
        for name, value in options.items()
        if value != model.model_fields[name].get_default()
    }
    refused = {name: SERVICE.refused[name] for name in given.keys() & SERVICE.refused.keys()}
    refused |= {name: "it runs here only" for name, value in here_only.items() if value}
    if not endpoint.local:
        local = schemes.locate(reference.location, schemes.SCHEMES, "outputs").scheme.remote
        if not local and (reference.format not in ("auto", "jsonl")):
            refused["outputs_format"] = "local outputs are sent as JSON Lines"
        if not local and reference.case_attribute != DEFAULT_CASE_ATTRIBUTE:
            refused["case_attribute"] = "local outputs are sent as JSON Lines"
    if not refused:
        return given
    if endpoint.local:
        return None
    name, why = next(iter(sorted(refused.items())))
    common.fail(f"--{name.replace('_', '-')} is not available when calling a service: {why}")


ANSWER_MODULES = ("assay.runs.records", "assay.runs.render", "assay.gate.decision")
"""What turns a service's answer into a result and prints it: the models pull in much of the
domain, about as long to import as the rest of the command line."""


def called(action: Callable[[], T], *, answer_models: bool = False) -> T:
    """Run a client call; the service's problem becomes one line and exit 2. With
    `answer_models`, `ANSWER_MODULES` load in a thread while it waits for the service rather
    than afterwards (`assay.preload`); the thread is joined before the command goes on, and
    before a problem is printed."""
    loading = preload(ANSWER_MODULES) if answer_models else None
    try:
        try:
            return action()
        finally:
            if loading is not None:
                loading.join()
    except AssayAPIError as exc:
        where = f"HTTP {exc.status}: " if exc.status is not None else ""
        common.fail(f"{where}{exc.detail}")


def _client(endpoint: Endpoint) -> AssayClient:
    """A client of `endpoint`: a malformed URL (or `$ASSAY_TIMEOUT`) is one line."""
    return common.guarded(lambda: AssayClient(endpoint.url, endpoint.token))


def _rows(path: Path) -> Iterator[dict[str, Any]]:
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            common.fail(f"{path} line {number}: malformed JSON")
        if not isinstance(row, dict):
            common.fail(f"{path} line {number}: not a JSON object")
        yield row


def _outputs(
    reference: OutputsReference, local: bool
) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(inline rows, None) for a local file or folder; (None, URI) for a location the service
    reads itself (`s3://` and any other scheme that is `remote`, and, for the local service,
    the user's own paths, by absolute path: nothing is copied over HTTP)."""
    outputs = reference.location
    location = schemes.locate(outputs, (schemes.FileScheme.name, *schemes.REMOTE), "outputs")
    if location.scheme.remote:
        return None, str(reference)
    path = Path(location.rest)
    if local:
        absolute = reference.model_copy(update={"location": str(path.resolve())})
        return None, str(absolute)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
    elif path.is_file():
        files = [path]
    else:
        common.fail(f"{outputs}: no such outputs file or folder")
    return [row for file in files for row in _rows(file)], None


def _suite_ref(client: AssayClient, suite: str, local: bool) -> str:
    """A published reference: a suite file is published first (as the CLI does locally); the
    local service is sent its path, and publishes it itself (or recognises its bytes)."""
    path = Path(suite)
    if not path.is_file():
        from assay.suites.registry import refuse_missing_file

        refuse_missing_file(suite)  # as a run here says it
        return suite
    if local:
        return str(path.resolve())
    from assay.documents import parse_document, read_text

    # Read as a local run reads it: a duplicate key or an alias bomb is refused here, naming
    # the line, before anything is sent.
    document = common.guarded(lambda: parse_document(read_text(path), suite))
    if not isinstance(document, dict):
        common.fail(f"{suite}: not a suite document")
    published = called(lambda: client.publish_suite(document))
    return f"{published['suite']}@{published['version']}"


def _submission(
    client: AssayClient,
    suite: str,
    reference: OutputsReference,
    options: Mapping[str, Any],
    local: bool,
) -> dict[str, Any]:
    """A service run's request: the suite published, the subject named (by default after the
    outputs), the outputs inline or by URI, and the run options given."""
    from assay.subject import Subject

    who = common.guarded(lambda: Subject.given_or_default(options.get("subject"), reference))
    rows, uri = _outputs(reference, local)
    return {
        **options,
        "suite": _suite_ref(client, suite, local),
        "subject": str(who),
        "outputs": rows,
        "outputs_uri": uri,
    }


def run(
    endpoint: Endpoint, suite: str, outputs: OutputsReference, options: Mapping[str, Any]
) -> EvalResult:
    """`assay run` through the service: the EvalResult (`options`: the run options the
    command line was given, as `AssayClient.run` takes them)."""
    with _client(endpoint) as client:
        submission = _submission(client, suite, outputs, options, endpoint.local)
        result = called(lambda: client.run(**submission), answer_models=True)
    from assay.runs.records import EvalResult  # loaded while the service ran (`called`)

    assert isinstance(result, EvalResult)  # waited for: never the accepted state
    return result


def gate(
    endpoint: Endpoint, suite: str, outputs: OutputsReference, options: Mapping[str, Any]
) -> GateReport:
    """`assay gate` through the service: the gate report (`options` as `AssayClient.gate`)."""
    with _client(endpoint) as client:
        submission = _submission(client, suite, outputs, options, endpoint.local)
        report = called(lambda: client.gate(**submission), answer_models=True)
    from assay.gate.decision import GateReport  # loaded while the service ran (`called`)

    assert isinstance(report, GateReport)
    return report


def plan(
    endpoint: Endpoint,
    suite: str,
    outputs: OutputsReference,
    options: Mapping[str, Any],
    *,
    gate: bool,
) -> CostPlan:
    """`assay run --plan` (or `assay gate --plan`) through the service: its cost plan."""
    with _client(endpoint) as client:
        submission = _submission(client, suite, outputs, options, endpoint.local)
        return called(lambda: client.plan(**submission, gate=gate))


def result_or_state(endpoint: Endpoint, run_id: str) -> EvalResult | RunState:
    """`assay runs show` through the service (`run_id`: an id or a unique prefix)."""
    with _client(endpoint) as service:
        return called(lambda: service.result(run_id), answer_models=True)


def answer(endpoint: Endpoint, path: str) -> Any:
    """The service's JSON answer to `GET path`, as sent (what `--json` prints)."""
    with _client(endpoint) as service:
        return called(lambda: service.answer(path))


def runs(endpoint: Endpoint) -> list[RunAggregate]:
    """`assay runs list` through the service."""
    from assay.runs.records import RunAggregate

    with _client(endpoint) as service:
        listed = called(service.runs)
        source = f"GET {service.url}/runs answered a run"
        return called(lambda: [validated(RunAggregate, run, source) for run in listed])


def cases(endpoint: Endpoint, run_id: str, status: CaseFilter | None) -> list[CaseResult]:
    """`assay runs cases` through the service (`run_id`: an id or a unique prefix)."""
    with _client(endpoint) as service:
        return called(lambda: service.cases(run_id, status))


def report(endpoint: Endpoint, run_id: str) -> str:
    """`assay report RUN_ID` through the service: the run's page (`run_id`: an id or a
    unique prefix)."""
    with _client(endpoint) as service:
        return called(lambda: service.report(run_id))


def scorecards(
    endpoint: Endpoint, subject: str | None, suite: str | None, last: int
) -> list[ScorecardRow]:
    """`assay scorecard` through the service: its rows."""
    from assay.runs.scorecard import ScorecardRow

    with _client(endpoint) as service:
        rows = called(lambda: service.scorecards(subject, suite, last))
        source = f"GET {service.url}/scorecards answered a row"
        return called(lambda: [validated(ScorecardRow, row, source) for row in rows])


def gate_check(endpoint: Endpoint, run_id: str) -> GateCheck:
    """`assay gate --check` through the service (which takes a unique prefix itself)."""
    with _client(endpoint) as service:
        return called(lambda: service.gate_check(run_id))


def findings(
    endpoint: Endpoint,
    suite: str | None,
    subject: str | None,
    kind: str | None,
    since: str | None,
) -> list[Finding]:
    """`assay findings` through the service: its findings, newest first."""
    from assay.findings import Finding

    with _client(endpoint) as service:
        found = called(lambda: service.findings(suite, subject, kind, since))
        source = f"GET {service.url}/findings answered a finding"
        return called(lambda: [validated(Finding, item, source) for item in found])
