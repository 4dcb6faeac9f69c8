"""The one registry of location schemes (`assay.schemes`): every store and reader of user data
goes through it, so an unknown scheme is one clear error everywhere and no other module tells
schemes apart by their prefix."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner

from assay import schemes, staging
from assay.calibration.labels import load_set
from assay.cli import app
from assay.errors import InputError
from assay.monitor.signals import read_signals
from assay.outcome.records import check_records
from assay.outputs.index import validate_outputs
from assay.outputs.sources import output_sources
from assay.release import load_trials
from assay.schemes import locate, open_store
from assay.schemes.base import UnknownSchemeError
from assay.store import FileStore
from tests.conftest import EXAMPLES

ROOT = Path(__file__).resolve().parent.parent
SCHEME_CHECK = re.compile(
    r"""(startswith|removeprefix)\(\(?\s*["'](s3|file|inline)\b|[=!]=\s*["'](s3|file|inline)["']"""
    r"""|\(\s*["']s3["']\s*,\s*[)"']|,\s*["']s3["']\s*\)|\bS3Scheme\b"""
)
"""A module telling schemes apart itself: `startswith("s3://")`, `== "file"`, a tuple naming
`s3` (`("s3",)`, `("file", "s3")`), the S3 scheme's class, …"""


def test_scheme_checks_live_in_one_module() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for package in ("assay", "tasks", "flows", "blocks")
        for path in sorted((ROOT / package).rglob("*.py"))
        if ROOT / "assay" / "schemes" not in path.parents
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if SCHEME_CHECK.search(line)
    ]
    assert offenders == []


def test_the_pattern_finds_what_it_forbids() -> None:
    for line in (
        'if uri.startswith("s3://"):',
        "x.removeprefix('file://')",
        'scheme == "file"',
        'locate(location, ("s3",), "outputs_uri")',
        'locate(outputs, ("file", "s3"), "outputs")',
        "isinstance(location.scheme, schemes.S3Scheme)",
    ):
        assert SCHEME_CHECK.search(line), line


def test_locate_parses_every_scheme_and_plain_paths(tmp_path: Path) -> None:
    plain = locate(str(tmp_path))
    assert (plain.scheme.name, plain.rest) == ("file", str(tmp_path))
    assert locate(f"file://{tmp_path}").rest == str(tmp_path)
    assert (locate("s3://bucket/a/b.jsonl").scheme.name, locate("S3://b/k").scheme.name) == (
        "s3",
        "s3",
    )
    assert locate("inline://abc/outputs.jsonl").scheme.name == "inline"
    assert locate("relative/dir:with/colon").scheme.name == "file"
    assert tuple(schemes.STORES) == ("file", "s3")


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    ("read", "what"),
    [
        (lambda uri: output_sources(uri), "outputs"),
        (lambda uri: validate_outputs(uri, {"a"}), "outputs"),
        (load_trials, "trials"),
        (read_signals, "signals"),
        (check_records, "records"),
        (load_set, "calibration set"),
        (open_store, "an evidence store"),
    ],
)
def test_an_unknown_scheme_is_one_clear_error(read, what: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UnknownSchemeError) as caught:
        read("gs://bucket/data.jsonl")
    assert isinstance(caught.value, InputError) and isinstance(caught.value, ValueError)
    assert _one_line(caught.value).startswith(
        f"gs://bucket/data.jsonl: unsupported scheme 'gs' for {what} (use file://PATH or s3://"
    )


def test_inline_is_for_outputs_only() -> None:
    with staging.staged(b'{"case_id": "a", "output": "x"}\n') as reference:
        assert [s.name for s in output_sources(reference)] == [reference]
        for read in (load_trials, read_signals, check_records, load_set, open_store):
            with pytest.raises(UnknownSchemeError, match="unsupported scheme 'inline'"):
                read(reference)


def test_a_store_needs_a_uri_not_a_path(tmp_path: Path) -> None:
    with pytest.raises(UnknownSchemeError, match="an evidence store is named by a URI"):
        open_store(str(tmp_path))
    assert isinstance(open_store(f"file://{tmp_path}"), FileStore)


def test_the_storage_block_refuses_an_unknown_scheme() -> None:
    from blocks import EvidenceStorage

    with pytest.raises(ValidationError, match="unsupported scheme 'gs' for an evidence store"):
        EvidenceStorage(url="gs://bucket/evidence")


def test_file_uris_and_plain_paths_read_alike(tmp_path: Path) -> None:
    trials = EXAMPLES / "release" / "trials.jsonl"
    assert load_trials(f"file://{trials}") == load_trials(str(trials))
    folder = tmp_path / "signals"
    folder.mkdir()
    shutil.copy(next((EXAMPLES / "monitor").glob("*.jsonl")), folder / "s.jsonl")
    assert read_signals(f"file://{folder}") == read_signals(str(folder))


def test_the_cli_answers_an_unknown_scheme_in_one_line(tmp_path: Path) -> None:
    invoked = CliRunner().invoke(
        app,
        ["run", str(EXAMPLES / "support-suite.yaml"), "--outputs", "gs://bucket/outputs.jsonl"],
    )
    assert invoked.exit_code == 2
    assert " ".join(invoked.output.split()) == (
        "error: gs://bucket/outputs.jsonl: unsupported scheme 'gs' for outputs (use "
        "file://PATH or s3://BUCKET/PREFIX or inline://NAME)"
    )
