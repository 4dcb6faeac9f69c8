"""One set of run options (`assay.runs.options`): its bounds refused alike by the CLI, the
service's request model and the flow's parameter validation; its descriptions are the CLI's
`--help`, the OpenAPI schema and docs/configuration.md; the outputs a launcher validated are
read in full once per process.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from assay.api.requests import RunRequest
from assay.cli import app
from assay.outputs.reference import OutputsReference
from assay.runs.options import GateOptions, RunOptions, option_problem, options_table
from assay.runs.sampling import index_run_outputs
from assay.suites.suite import load_suite
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent
SUITE = str(EXAMPLES / "support-suite.yaml")
V1 = str(EXAMPLES / "outputs" / "support-bot-v1.jsonl")


def _problem(**options: object) -> str:
    with pytest.raises(ValidationError) as caught:
        GateOptions(suite=SUITE, outputs=V1, **options)  # type: ignore[arg-type]
    return option_problem(caught.value)


def test_every_bound_is_refused_with_one_line_naming_the_option() -> None:
    assert _problem(judge_repeats=1000) == "--judge-repeats must be between 1 and 15, not 1000"
    assert _problem(judge_repeats=0) == "--judge-repeats must be between 1 and 15, not 0"
    assert _problem(sample=0) == "--sample must be at least 1"
    assert _problem(chunk_size=0).startswith("--chunk-size must be between 1 and")
    assert _problem(workers=0) == "--workers must be at least 1"
    assert _problem(max_judge_flip_rate=1.5) == (
        "--max-judge-flip-rate must be between 0.0 and 1.0, not 1.5"
    )
    assert "identifiers are at most 128 bytes" in _problem(baseline="b" * 129)
    assert "identifiers are at most 128 bytes" in _problem(run_id="r" * 129)
    assert "garbage" in _problem(dask="garbage")
    assert "not both" in _problem(dask="tcp://127.0.0.1:8786", workers=2)
    assert "resume needs the run_id" in _problem(resume=True)
    assert _problem(judge_repeat=3) == "--judge-repeat: Extra inputs are not permitted"


def test_a_plain_outputs_string_is_a_location_never_re_parsed() -> None:
    options = RunOptions(suite=SUITE, outputs="exports/traces?format=otlp")
    assert options.outputs == OutputsReference(location="exports/traces?format=otlp")
    structured = RunOptions(suite=SUITE, outputs=OutputsReference(location="t", format="otlp"))
    assert structured.outputs.format == "otlp"


def test_the_cli_refuses_what_the_model_refuses(store_dir: Path) -> None:
    for flags, line in [
        (["--judge-repeats", "1000"], "--judge-repeats must be between 1 and 15, not 1000"),
        (["--sample", "0"], "--sample must be at least 1"),
        (["--chunk-size", "0"], "--chunk-size must be between 1 and 1000000, not 0"),
    ]:
        done = CliRunner().invoke(app, ["run", SUITE, "--outputs", V1, *flags])
        assert done.exit_code == 2 and line in done.output, done.output
    assert not (store_dir / "runs").exists()


def test_the_service_s_request_takes_the_same_bounds_and_descriptions() -> None:
    schema = RunRequest.model_json_schema()["properties"]
    for name in ("sample", "seed", "baseline", "judge_block", "fresh_judge"):
        assert schema[name]["description"] == RunOptions.model_fields[name].description
    with pytest.raises(ValidationError, match="greater than or equal to 1"):
        RunRequest(suite="s", subject="agent:a", outputs_uri="s3://b/p", sample=0)


def test_the_help_texts_are_the_model_s() -> None:
    done = CliRunner().invoke(app, ["gate", "--help"], env={"COLUMNS": "400"})
    shown = re.sub(r"\s+", " ", done.output)
    for name in ("judge_repeats", "max_judge_flip_rate", "calibration", "sample"):
        description = RunOptions.model_fields.get(name) or GateOptions.model_fields[name]
        assert description.description is not None
        assert description.description.replace("`", "") in shown, name


def test_docs_configuration_holds_the_model_s_table() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    documented = page.split("<!-- options-table", 1)[1].split("-->", 1)[1]
    documented = documented.split("<!-- /options-table -->", 1)[0].strip()
    assert documented == options_table()


def test_outputs_validated_once_are_not_read_again_until_they_change(tmp_path: Path) -> None:
    suite = load_suite(Path(SUITE))
    outputs = tmp_path / "out.jsonl"
    outputs.write_bytes(Path(V1).read_bytes())
    reference = OutputsReference(location=str(outputs))

    first = index_run_outputs(suite, reference, None, 0, 10)
    assert index_run_outputs(suite, reference, None, 0, 10) is first  # the launcher's index
    assert index_run_outputs(suite, reference, 5, 0, 10) is not first  # another selection

    lines = outputs.read_text().splitlines()
    outputs.write_text("\n".join(lines[:-1]) + "\n")  # one output fewer: size and mtime change
    stat = outputs.stat()
    os.utime(outputs, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    again = index_run_outputs(suite, reference, None, 0, 10)
    assert again is not first
    assert again.seen == first.seen - 1
    assert json.loads(lines[-1])["case_id"] in again.missing
