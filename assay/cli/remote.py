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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from assay import schemes
from assay.cli import _common as common
from assay.cli._commands import DEFAULT_CASE_ATTRIBUTE
from assay.client import AssayAPIError, AssayClient, validated
from assay.preload import preload

if TYPE_CHECKING:
    from assay.gate.decision import GateReport
    from assay.gate.overrides import GateCheck
    from assay.runs.cases import CaseFilter, CaseResult
    from assay.runs.records import EvalResult, RunAggregate, RunState

T = TypeVar("T")


def refuse_local_options(outputs_format: str, case_attribute: str, **given: object) -> None:
    """One line, exit 2, for an option a service run cannot take (named with its flag): any of
    `given` that is set, an OTLP `--outputs-format` or another `--case-attribute` (the service
    takes outputs as JSON Lines)."""
    given["outputs_format"] = None if outputs_format in ("auto", "jsonl") else outputs_format
    given["case_attribute"] = None if case_attribute == DEFAULT_CASE_ATTRIBUTE else case_attribute
    for flag, value in given.items():
        if value not in (None, False):
            common.fail(f"--{flag.replace('_', '-')} is not available when calling a service")


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


def _client(url: str) -> AssayClient:
    """A client of the service at `url`: a malformed URL (or `$ASSAY_TIMEOUT`) is one line."""
    return common.guarded(lambda: AssayClient(url))


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


def _outputs(outputs: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """(inline rows, None) for a local file or folder; (None, URI) for an `s3://` prefix."""
    location = schemes.locate(outputs, ("file", "s3"), "outputs")
    if isinstance(location.scheme, schemes.S3Scheme):
        return None, outputs
    path = Path(location.rest)
    if path.is_dir():
        files = sorted(path.glob("*.jsonl"))
    elif path.is_file():
        files = [path]
    else:
        common.fail(f"{outputs}: no such outputs file or folder")
    return [row for file in files for row in _rows(file)], None


def _suite_ref(client: AssayClient, suite: str) -> str:
    """A published reference: a suite file is published first (as the CLI does locally)."""
    path = Path(suite)
    if not path.is_file():
        return suite
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
    outputs: str,
    subject: str | None,
    sample: int | None,
    seed: int,
) -> dict[str, Any]:
    from assay.subject import Subject

    who = common.guarded(lambda: Subject.given_or_default(subject, outputs))
    rows, uri = _outputs(outputs)
    return {
        "suite": _suite_ref(client, suite),
        "subject": str(who),
        "outputs": rows,
        "outputs_uri": uri,
        "sample": sample,
        "seed": seed if sample is not None else None,
    }


def run(
    url: str,
    suite: str,
    outputs: str,
    subject: str | None,
    sample: int | None,
    seed: int,
    **options: Any,
) -> EvalResult:
    """`assay run` through the service: the EvalResult (`options`: `baseline`, `judge_block`,
    `fresh_judge`, as `AssayClient.run` takes them)."""
    with _client(url) as client:
        submission = _submission(client, suite, outputs, subject, sample, seed)
        result = called(lambda: client.run(**submission, **options), answer_models=True)
    from assay.runs.records import EvalResult  # loaded while the service ran (`called`)

    assert isinstance(result, EvalResult)  # waited for: never the accepted state
    return result


def gate(
    url: str,
    suite: str,
    outputs: str,
    subject: str | None,
    sample: int | None,
    seed: int,
    **options: Any,
) -> GateReport:
    """`assay gate` through the service: the gate report (`options` as `AssayClient.gate`)."""
    with _client(url) as client:
        submission = _submission(client, suite, outputs, subject, sample, seed)
        report = called(lambda: client.gate(**submission, **options), answer_models=True)
    from assay.gate.decision import GateReport  # loaded while the service ran (`called`)

    assert isinstance(report, GateReport)
    return report


def result_or_state(url: str, run_id: str) -> EvalResult | RunState:
    """`assay runs show` through the service."""
    with _client(url) as service:
        return called(lambda: service.result(run_id), answer_models=True)


def answer(url: str, path: str) -> Any:
    """The service's JSON answer to `GET path`, as sent (what `--json` prints)."""
    with _client(url) as service:
        return called(lambda: service.answer(path))


def runs(url: str) -> list[RunAggregate]:
    """`assay runs list` through the service."""
    from assay.runs.records import RunAggregate

    with _client(url) as service:
        listed = called(service.runs)
        source = f"GET {service.url}/runs answered a run"
        return called(lambda: [validated(RunAggregate, run, source) for run in listed])


def cases(url: str, run_id: str, status: CaseFilter | None) -> list[CaseResult]:
    """`assay runs cases` through the service."""
    with _client(url) as service:
        return called(lambda: service.cases(run_id, status))


def gate_check(url: str, run_id: str) -> GateCheck:
    """`assay gate --check` through the service."""
    with _client(url) as service:
        return called(lambda: service.gate_check(run_id))
