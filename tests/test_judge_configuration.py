"""One judge configuration: `JudgeSettings.from_env()` builds the same validated block a saved
one is, a variable out of bounds is one line naming it before any flow starts, and the calls a
run keeps in flight are bounded per process, whatever number of chunks judge there at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from assay.errors import InputError
from assay.hashing import OutputHasher, store_secret
from assay.judge.cache import cache_key
from assay.judge.config import JudgeConfig
from assay.judge.port import JudgePin, JudgeRequest
from assay.judge.service import judge_requests
from assay.runs.options import MAX_JUDGE_REPEATS
from assay.store import FileStore
from blocks.judge_settings import JudgeSettings, judge_setup
from tests.judge_server import JudgeServer, slow, verdict

BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parent.parent
JUDGE = {"ASSAY_JUDGE_MODEL": "judge-test-1", "OPENAI_API_KEY": "sk-test"}


def test_from_env_builds_the_block_the_variables_describe() -> None:
    settings = JudgeSettings.from_env(
        JUDGE
        | {
            "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
            "ASSAY_JUDGE_CONCURRENCY": " 7 ",
            "ASSAY_JUDGE_INPUT_PRICE": "0.15",
            "ASSAY_JUDGE_OUTPUT_PRICE": "0.6",
            "ASSAY_JUDGE_REDACT": "email",
        }
    )
    assert settings is not None
    assert (settings.model, settings.base_url, settings.max_concurrency) == (
        "judge-test-1",
        "http://127.0.0.1:9/v1",
        7,
    )
    assert (settings.input_price_per_million, settings.output_price_per_million) == (0.15, 0.6)
    assert settings.redact == ["email"]
    assert settings.api_key is not None and settings.api_key.get_secret_value() == "sk-test"
    assert JudgeSettings.from_env({"ASSAY_JUDGE_MODEL": "m"}) is None  # no credentials
    assert JudgeSettings.from_env({"OPENAI_API_KEY": "k"}) is None  # no judge configured


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("ASSAY_JUDGE_CONCURRENCY", "0"),
        ("ASSAY_JUDGE_CONCURRENCY", "abc"),
        ("ASSAY_JUDGE_CONCURRENCY", "100000"),
        ("ASSAY_JUDGE_INPUT_PRICE", "-1"),
        ("ASSAY_JUDGE_OUTPUT_PRICE", "nan"),
    ],
)
def test_a_variable_out_of_bounds_is_an_input_error_naming_it(variable: str, value: str) -> None:
    with pytest.raises(InputError) as raised:
        JudgeSettings.from_env(JUDGE | {variable: value})
    assert raised.value.source == variable
    assert "\n" not in str(raised.value) and value not in str(raised.value)
    with pytest.raises(InputError):  # a bad value is refused, a judge configured or not
        JudgeSettings.from_env({variable: value})


def test_one_bound_per_setting() -> None:
    JudgeSettings(model="m", judge_repeats=MAX_JUDGE_REPEATS)
    with pytest.raises(ValidationError):
        JudgeSettings(model="m", judge_repeats=MAX_JUDGE_REPEATS + 1)
    with pytest.raises(ValidationError):
        JudgeSettings(model="m", max_concurrency=0)
    with pytest.raises(ValidationError):  # what travels with a run never holds a key
        JudgeConfig.model_validate({"model": "m", "api_key": "sk-test"})


def test_a_runs_settings_judge_with_this_process_key_and_nothing_else_of_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    launched = JudgeConfig(model="launched-model", base_url="http://127.0.0.1:9/v1")
    monkeypatch.setenv("ASSAY_JUDGE_MODEL", "worker-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    monkeypatch.setenv("ASSAY_JUDGE_CONCURRENCY", "2")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker")
    setup = judge_setup(None, False, config=launched)
    assert (setup.model, setup.max_concurrency) == ("launched-model", "auto")
    assert setup.make_judge is not None
    assert setup.make_judge().base_url == "http://127.0.0.1:9/v1"  # type: ignore[attr-defined]
    monkeypatch.delenv("OPENAI_API_KEY")
    assert judge_setup(None, False, config=launched).skip_reason == "no credentials"


@pytest.mark.parametrize("value", ["0", "abc"])
def test_assay_run_with_a_bad_judge_variable_is_one_line_and_exit_2(
    tmp_path: Path, value: str
) -> None:
    env = {key: item for key, item in os.environ.items() if not key.startswith("PREFECT_API")}
    env |= JUDGE | {"ASSAY_JUDGE_CONCURRENCY": value}
    done = subprocess.run(
        [
            str(BIN / "assay"),
            "run",
            str(REPO / "examples" / "support-suite.yaml"),
            "--outputs",
            str(REPO / "examples" / "outputs" / "support-bot-v1.jsonl"),
            "--store",
            f"file://{tmp_path / 'store'}",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ASSAY_JUDGE_CONCURRENCY: "), lines
    assert "Traceback" not in done.stdout + done.stderr


def test_the_chunks_of_a_run_in_one_process_share_its_calls_in_flight(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    """Four chunks judged side by side in one process (as the default runner's threads do) keep
    `max_concurrency` calls in flight together, not four times as many."""
    judge_server.script(default=slow(0.2, verdict("pass", 0.9)))
    store = FileStore(tmp_path / "store")
    setup = JudgeSettings(
        model="judge-test-1", base_url=judge_server.base_url, api_key="sk-test", max_concurrency=3
    ).judge_setup([], fresh=True)
    hasher = OutputHasher(store_secret(store))
    pin = JudgePin(model="judge-test-1", prompt_version="v")

    def chunk(number: int) -> None:
        requests = [
            JudgeRequest(case_id=f"c{number}-{i}", input="q", rubric="r", output=f"a{i}")
            for i in range(9)
        ]
        keyed = [(cache_key(hasher, "check", pin, {"case": r.case_id}), r) for r in requests]
        judge_requests(
            store, setup, keyed, run_id="one-run", chunk=number, suite="s", subject="agent:x"
        )

    threads = [threading.Thread(target=chunk, args=(number,)) for number in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(judge_server.requests) == 36
    assert judge_server.max_in_flight == 3
