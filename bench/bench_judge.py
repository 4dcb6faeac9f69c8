"""Judge benchmark: 1,000 judged cases against a local judge with 100 ms latency, concurrency 16
(or `auto` against a judge that answers 429 beyond `--provider-limit` calls at once).

Starts the scripted OpenAI-compatible judge server of the tests (`tests/judge_server.py`) in a
subprocess, answering every `POST /v1/chat/completions` with a passing verdict after a fixed
delay, and judges a generated suite (one `llm_judge` check per case) through the real code path:
`assay.runs.judging.judge_chunk` (verdict cache, FinOps preflight, bounded concurrency, cost ledger)
with a `FileStore`, the `OpenAIJudge` adapter and the real `openai` SDK over real HTTP. Prints

    wall time, the ideal (cases x latency / calls at once), ideal / wall as a percentage
    (goal >= 80%), and the calls made; with a provider limit, the 429s backed off and the most
    calls in flight; then the same suite again, answered by the verdict cache: calls made
    (goal 0) and wall time.

    python bench/bench_judge.py [--cases 1000] [--concurrency 16|auto] [--latency 0.1]
                                [--provider-limit N]

`--concurrency auto --provider-limit 32` is the adaptive scenario: with the default settings,
against a judge that answers in 100 ms and with 429 (`Retry-After-Ms: 100`) beyond 32 calls at
once, 1,000 judged cases in <= 5 s (ideal 1,000 x 0.1 s / 32 = 3.1 s), every 429 backed off.

Exit status: 0 when every run succeeded and counted what was expected (every case judged and
passed the first time, every verdict a cache hit the second time) whatever the goals say: this
is a measurement; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `tests.judge_server` and the packages, run from anywhere
    sys.path.insert(0, str(ROOT))

from assay.finops.pricing import Prices  # noqa: E402
from assay.hashing import OutputHasher, store_secret  # noqa: E402
from assay.judge import OpenAIJudge, load_prompt  # noqa: E402
from assay.judge.concurrency import run_slots  # noqa: E402
from assay.judge.config import AUTO, DEFAULT_CONCURRENCY_CEILING, Concurrency  # noqa: E402
from assay.judge.service import JudgeSetup  # noqa: E402
from assay.outputs.candidate import CandidateOutput  # noqa: E402
from assay.runs.judging import ChunkJudgement, judge_chunk  # noqa: E402
from assay.runs.scoring import CompiledSuite  # noqa: E402
from assay.scorers import Status  # noqa: E402
from assay.store import FileStore  # noqa: E402
from assay.suites.suite import load_suite  # noqa: E402

GOAL_RATIO = 0.80
GOAL_ADAPTIVE_SECONDS = 5.0
MODEL = "bench-judge-1"
PRICES = Prices(input_per_million=1.0, output_per_million=2.0)
SERVER_START_SECONDS = 30.0
TOPICS = ["refund", "exchange", "store credit", "cancellation", "warranty", "shipping fee"]


# ---------------------------------------------------------------- the judge server


def serve(port: int, latency: float, capacity: int | None) -> None:
    """Run the tests' scripted judge server on 127.0.0.1:`port` until killed.

    Every completion is a passing verdict answered after `latency` seconds; with a `capacity`,
    a request arriving while that many are served is answered 429 at once. Two routes are
    added for the benchmark: `GET /stats` (requests received, 429s for capacity, most in flight
    at once, calls served at once on average) and `POST /reset`.
    """
    import uvicorn

    from tests.judge_server import JudgeServer, slow

    state = JudgeServer()
    state.script(default=slow(latency), capacity=capacity)
    app = state.app()

    @app.get("/stats")
    async def stats() -> dict[str, float]:
        requests = state.requests
        served = [r for r in requests if not r.over_capacity and r.finished is not None]
        busy = max((r.finished or 0.0 for r in served), default=0.0) - min(
            (r.arrived for r in served), default=0.0
        )
        return {
            "requests": len(requests),
            "over_capacity": sum(r.over_capacity for r in requests),
            "max_in_flight": state.max_in_flight,
            "mean_served": sum((r.finished or 0.0) - r.arrived for r in served) / busy
            if busy > 0
            else 0.0,
            "cpu_seconds": time.process_time(),
            "first_arrived": min((r.arrived for r in served), default=0.0),
            "last_finished": max((r.finished or 0.0 for r in served), default=0.0),
        }

    @app.post("/reset")
    async def reset() -> dict[str, bool]:
        state.reset()
        state.script(default=slow(latency), capacity=capacity)
        return {"reset": True}

    uvicorn.run(
        app,
        host="127.0.0.1",
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _http(url: str, method: str = "GET") -> dict[str, Any]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=5) as response:  # 127.0.0.1 only
        result: dict[str, Any] = json.loads(response.read())
        return result


class Server:
    """The judge server subprocess (its own interpreter, so it does not share Assay's GIL)."""

    def __init__(self, latency: float, capacity: int | None, log: Path) -> None:
        self.port = _free_port()
        self.root = f"http://127.0.0.1:{self.port}"
        self._log = log.open("wb")
        limit = [] if capacity is None else ["--provider-limit", str(capacity)]
        self._process = subprocess.Popen(
            [
                sys.executable,
                str(Path(__file__).resolve()),
                "--serve",
                "--port",
                str(self.port),
                "--latency",
                str(latency),
                *limit,
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            try:
                self.stats()
                return
            except OSError:
                if self._process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise BenchError(f"the judge server did not start (log: {log})") from None
                time.sleep(0.05)

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    def stats(self) -> dict[str, Any]:
        return _http(f"{self.root}/stats")

    def reset(self) -> None:
        _http(f"{self.root}/reset", method="POST")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._log.close()


# ---------------------------------------------------------------- generation


def generate(workdir: Path, cases: int) -> tuple[Path, Path]:
    """A JSON suite of `cases` cases with one `llm_judge` check each, and one output per case."""
    documents = []
    suite_path = workdir / f"judge-suite-{cases}.json"
    outputs_path = workdir / f"judge-outputs-{cases}.jsonl"
    with outputs_path.open("w", encoding="utf-8") as out:
        for index in range(1, cases + 1):
            topic = TOPICS[index % len(TOPICS)]
            order = 10000 + index
            case_id = f"case-{index:06d}"
            documents.append(
                {
                    "id": case_id,
                    "input": f"What is the status of the {topic} for order {order}?",
                    "expected": f"Confirms the {topic} for order {order} and gives a timeline.",
                    "scorers": [
                        {
                            "llm_judge": {
                                "rubric": f"Confirms the {topic} for order {order}, gives a "
                                "timeline, and does not ask for payment details."
                            }
                        }
                    ],
                }
            )
            output = (
                f"Thanks for reaching out. The {topic} for your order {order} is confirmed; "
                "you will see it within 5 to 7 business days. No further action is needed."
            )
            out.write(json.dumps({"case_id": case_id, "output": output}) + "\n")
    suite = {
        "suite": f"bench-judge-{cases}",
        "description": f"Judge benchmark: {cases} cases, one llm_judge check each",
        "pass_threshold": 0.8,
        "regression_threshold": 0.05,
        "defaults": [],
        "cases": documents,
    }
    suite_path.write_text(json.dumps(suite), encoding="utf-8")
    return suite_path, outputs_path


# ---------------------------------------------------------------- measurement


class BenchError(Exception):
    """A run failed or counted something other than what was expected."""


class TimedFileStore(FileStore):
    """A `FileStore` that counts its writes and the time they take (each is fsync'd)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.writes = 0
        self.write_seconds = 0.0

    def put_once(self, key: str, data: bytes) -> bool:
        started = time.perf_counter()
        try:
            return super().put_once(key, data)
        finally:
            self.writes += 1
            self.write_seconds += time.perf_counter() - started

    def put(self, key: str, data: bytes) -> None:
        started = time.perf_counter()
        try:
            super().put(key, data)
        finally:
            self.writes += 1
            self.write_seconds += time.perf_counter() - started


@dataclass
class Run:
    label: str
    wall: float
    judgement: ChunkJudgement
    server_requests: int
    over_capacity: int
    """Requests the server answered 429 because its limit of calls at once was reached."""
    max_in_flight: int
    mean_served: float
    """Calls the server served at once on average over the run."""
    window_peak: int
    """The most calls the run's window let into flight at once (retries waiting included)."""
    backed_off: int
    """429s the run's window counted (each backed off for its `Retry-After`, then retried)."""
    client_cpu: float
    """CPU seconds of this process (Assay, the openai SDK, the store) during the run."""
    server_cpu: float
    """CPU seconds of the judge server process during the run."""
    store_writes: int
    store_seconds: float

    def count(self, status: Status) -> int:
        return sum(1 for outcome in self.judgement.outcomes.values() if outcome.status is status)


def judge_setup(base_url: str, concurrency: Concurrency) -> JudgeSetup:
    """The setup `blocks.judge_settings.judge_setup` builds from `ASSAY_JUDGE_MODEL`,
    `OPENAI_API_KEY`, `OPENAI_BASE_URL`, `ASSAY_JUDGE_CONCURRENCY` and the price variables —
    without reading the FinOps budgets from Prefect (no Prefect API here): no budget applies, the
    preflight allows."""
    prompt = load_prompt()
    return JudgeSetup(
        make_judge=partial(OpenAIJudge, MODEL, base_url=base_url, api_key="bench", prompt=prompt),
        skip_reason="",
        model=MODEL,
        prompt_version=prompt.version,
        max_concurrency=concurrency,
        prices=PRICES,
        budgets=[],
    )


def judge_once(
    label: str,
    server: Server,
    store: TimedFileStore,
    compiled: CompiledSuite,
    outputs: list[CandidateOutput],
    setup: JudgeSetup,
) -> Run:
    server.reset()
    hasher = OutputHasher(store_secret(store))
    server_cpu = float(server.stats()["cpu_seconds"])
    store.writes, store.write_seconds = 0, 0.0
    cpu = time.process_time()
    started = time.perf_counter()
    judgement = judge_chunk(
        store, compiled, outputs, hasher, setup, run_id=label, chunk=0, subject="agent:bench"
    )
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    stats = server.stats()
    window = run_slots(label, setup.max_concurrency, setup.concurrency_ceiling)
    return Run(
        label=label,
        wall=wall,
        judgement=judgement,
        server_requests=int(stats["requests"]),
        over_capacity=int(stats["over_capacity"]),
        max_in_flight=int(stats["max_in_flight"]),
        mean_served=float(stats["mean_served"]),
        window_peak=window.peak,
        backed_off=window.congestion["429"],
        client_cpu=cpu,
        server_cpu=float(stats["cpu_seconds"]) - server_cpu,
        store_writes=store.writes,
        store_seconds=store.write_seconds,
    )


def check(run: Run, calls: int, cache_hits: int, requests: int, passes: int) -> None:
    """Raise unless the run made exactly these calls, hits, server requests (besides the 429s
    it backed off, each counted by its window) and passes."""
    expected = (calls, cache_hits, requests, passes, run.over_capacity)
    got = (
        run.judgement.calls,
        run.judgement.cache_hits,
        run.server_requests - run.over_capacity,
        run.count(Status.PASS),
        run.backed_off,
    )
    if got != expected:
        raise BenchError(
            f"{run.label}: (calls, cache hits, server requests, passes) = {got}, expected "
            f"{expected} (skipped verdicts: {run.count(Status.SKIPPED)})"
        )


def report(args: argparse.Namespace, first: Run, cached: Run) -> None:
    at_once = DEFAULT_CONCURRENCY_CEILING if args.concurrency == AUTO else args.concurrency
    at_once = min(at_once, args.provider_limit or at_once)
    ideal = args.cases * args.latency / at_once
    ratio = ideal / first.wall
    limit = f" · provider limit {args.provider_limit} at once (429 beyond)"
    print()
    print(
        f"machine: nproc {os.cpu_count()} · Python {platform.python_version()} "
        f"({platform.python_implementation()}) · {platform.system()} {platform.machine()}"
    )
    print(
        f"{args.cases} cases, one llm_judge check each · judge latency {args.latency * 1000:.0f} ms"
        f" per call · concurrency {args.concurrency}{limit if args.provider_limit else ''} · "
        "path: assay.runs.judging.judge_chunk + OpenAIJudge (openai SDK, HTTP)"
    )
    print()
    print(f"judged run   wall time      : {first.wall:8.2f} s")
    print(
        f"             ideal          : {ideal:8.2f} s  "
        f"({args.cases} x {args.latency:g} s / {at_once})"
    )
    print(
        f"             ideal / wall   : {ratio:8.1%}    goal >= {GOAL_RATIO:.0%}  "
        f"{'PASS' if ratio >= GOAL_RATIO else 'FAIL'}"
    )
    if args.concurrency == AUTO and args.provider_limit:
        print(
            f"             wall <= {GOAL_ADAPTIVE_SECONDS:g} s    :     "
            f"{'PASS' if first.wall <= GOAL_ADAPTIVE_SECONDS else 'FAIL'}"
        )
    print(
        f"             calls made     : {first.judgement.calls:8d}    "
        f"(server received {first.server_requests}, at most {first.max_in_flight} in flight)"
    )
    print(
        f"             429s backed off: {first.backed_off:8d}    (the server refused "
        f"{first.over_capacity}; every one retried after its Retry-After)"
    )
    print(
        f"             in flight      : {first.window_peak:8d}    at most (the window, "
        f"retries waiting included); {first.mean_served:.1f} served at once on average"
    )
    print(f"             cost (ledger)  : {first.judgement.cost_usd:10.6f} USD")
    print(
        f"             store writes   : {first.store_seconds:8.2f} s in {first.store_writes} "
        "(fsync'd: a verdict-cache record per call and a ledger record per group of calls "
        "returning together, overlapping the calls; + 1 batch summary)"
    )
    print(
        f"             CPU            : {first.client_cpu:8.2f} s here (Assay + openai SDK), "
        f"{first.server_cpu:.2f} s in the judge server"
    )
    print(
        f"cached run   calls made     : {cached.judgement.calls:8d}    goal 0  "
        f"{'PASS' if cached.judgement.calls == 0 and cached.server_requests == 0 else 'FAIL'}"
        f"  (server received {cached.server_requests}; "
        f"{cached.judgement.cache_hits} cache hits)"
    )
    print(f"             wall time      : {cached.wall:8.2f} s")


# ---------------------------------------------------------------- main


def end_to_end(
    args: argparse.Namespace, server: Server, workdir: Path, suite: Path, outputs: Path
) -> int:
    """`assay run SUITE --outputs OUT --fresh-judge --json` through the local Assay service
    (`assay server start`, its own PREFECT_HOME and store), as a user runs it: wall time of the
    command, median of `--repeat`; then the same run answered by the verdict cache."""
    import statistics

    sys.path.insert(0, str(ROOT / "bench"))
    from bench_client import wait_idle  # the client benchmark's test: no flow run pending

    from assay.cli.local_service import STATE_FILE, LocalService
    from assay.client import AssayClient

    def local_service(home: Path) -> LocalService:
        """The local service `assay server start` keeps for `home`: its URL and credential."""
        return LocalService.model_validate_json((home / STATE_FILE).read_text())

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))},
        "PREFECT_HOME": str(workdir / "prefect-home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "ASSAY_STORE": f"file://{workdir / 'e2e-store'}",
        "ASSAY_JUDGE_MODEL": "bench-judge",
        "ASSAY_JUDGE_CONCURRENCY": str(args.concurrency),
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": server.base_url,
    }
    assay = [sys.executable, "-m", "assay.cli"]
    subject = "agent:bench-judge"
    run = [*assay, "run", str(suite), "--outputs", str(outputs), "--subject", subject, "--json"]

    def timed(*extra: str) -> tuple[float, dict[str, Any]]:
        started = time.perf_counter()
        done = subprocess.run([*run, *extra], env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise BenchError(f"assay run: exit {done.returncode}: {done.stderr[-1500:]}")
        result: dict[str, Any] = json.loads(done.stdout)
        if result["metrics"]["passed"] != args.cases:
            raise BenchError(f"{result['metrics']['passed']} of {args.cases} judged cases passed")
        return seconds, result

    port = str(_free_port())
    subprocess.run([*assay, "server", "start", "--port", port], env=env, check=True)
    try:
        timed()  # publishes the suite and warms the service
        judged: list[float] = []
        phases: list[tuple[float, float, float, float]] = []  # before, judging, after, at once
        for _ in range(args.repeat):
            server.reset()
            wait_idle(f"http://127.0.0.1:{port}/api")
            started = time.monotonic()  # the judge server's clock too (CLOCK_MONOTONIC)
            seconds, _ = timed("--fresh-judge")
            stats = server.stats()
            if int(stats["requests"]) != args.cases:
                raise BenchError(f"{stats['requests']} judge calls for {args.cases} cases")
            judged.append(seconds)
            phases.append(
                (
                    stats["first_arrived"] - started,
                    stats["last_finished"] - stats["first_arrived"],
                    started + seconds - stats["last_finished"],
                    stats["mean_served"],
                )
            )
        server.reset()
        wait_idle(f"http://127.0.0.1:{port}/api")
        cached, _ = timed()  # right after a judged run, as in a loop of runs
        cached_calls = int(server.stats()["requests"])
        alone = []
        for _ in range(args.repeat):  # each once the service is idle: the fixed cost alone
            wait_idle(f"http://127.0.0.1:{port}/api")
            alone.append(timed()[0])
        cached_calls += int(server.stats()["requests"])
        served = []  # the service's share: POST /runs until the answer, as the command sends it
        service = local_service(workdir / "prefect-home")
        with AssayClient(service.url, service.token) as client:
            for _ in range(args.repeat):
                wait_idle(f"http://127.0.0.1:{port}/api")
                started = time.perf_counter()
                client.run(f"bench-judge-{args.cases}", subject=subject, outputs_uri=str(outputs))
                served.append(time.perf_counter() - started)
        cached_calls += int(server.stats()["requests"])
    except BenchError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        subprocess.run([*assay, "server", "stop"], env=env, capture_output=True)
        server.stop()
    ideal = args.cases * args.latency / (16 if args.concurrency == AUTO else args.concurrency)
    median = statistics.median(judged)
    load = os.getloadavg()
    print(
        f"\nassay run through the local service · {args.cases} judged cases · {args.latency} s a "
        f"call · concurrency {args.concurrency} · load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    print(
        f"  judged runs (median of {args.repeat}): {median:.2f} s "
        f"({', '.join(f'{t:.2f}' for t in judged)}); ideal {ideal:.2f} s; "
        f"wall / ideal {median / ideal:.2f} (goal ≤ 1.10)"
    )
    before, judging, after, at_once = (statistics.median(p[i] for p in phases) for i in range(4))
    print(
        f"    command start to the first judge request {before:.2f} s; first request to last "
        f"answer {judging:.2f} s ({at_once:.1f} calls at the judge on average); last answer to "
        f"the command's exit {after:.2f} s (medians)"
    )
    print(
        f"  fully cached re-run: {statistics.median(alone):.2f} s median of {args.repeat} "
        f"({', '.join(f'{t:.2f}' for t in alone)}), each once the service is idle (the fixed "
        f"cost; goal < 0.3 s); {cached:.2f} s right after a judged run; {cached_calls} judge calls"
    )
    print(
        f"    of which the service (POST /runs until the answer, median of {args.repeat}): "
        f"{statistics.median(served):.2f} s ({', '.join(f'{t:.2f}' for t in served)})"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument(
        "--concurrency",
        type=lambda text: AUTO if text == AUTO else int(text),
        default=16,
        help="calls in flight (a number), or auto",
    )
    parser.add_argument(
        "--provider-limit", type=int, help="the judge answers 429 beyond this many calls at once"
    )
    parser.add_argument("--latency", type=float, default=0.1, help="judge seconds per call")
    parser.add_argument("--workdir", type=Path, help="default: a temporary folder, removed")
    parser.add_argument(
        "--end-to-end",
        action="store_true",
        help="instead: `assay run` of the suite through the local Assay service (assay server "
        "start), median of --repeat, and a fully cached re-run (the fixed cost)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="with --end-to-end: runs per median")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.serve:
        if args.port is None:
            parser.error("--serve needs --port")
        serve(args.port, args.latency, args.provider_limit)
        return 0
    if args.cases < 1 or args.latency <= 0 or (args.concurrency != AUTO and args.concurrency < 1):
        parser.error("need --cases >= 1, --concurrency >= 1 or auto, and --latency > 0")

    for name in ("NO_PROXY", "no_proxy"):  # a proxy from the environment must not see 127.0.0.1
        os.environ[name] = "127.0.0.1,localhost"
    temporary = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="assay-bench-judge-")) if temporary else args.workdir
    workdir = workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    server: Server | None = None
    try:
        suite_path, outputs_path = generate(workdir, args.cases)
        if args.end_to_end:
            server = Server(args.latency, args.provider_limit, workdir / "judge-server.log")
            return end_to_end(args, server, workdir, suite_path, outputs_path)
        compiled = CompiledSuite.compile(load_suite(suite_path))
        with outputs_path.open(encoding="utf-8") as handle:
            outputs = [CandidateOutput.model_validate_json(line) for line in handle]
        store_root = workdir / "store"
        shutil.rmtree(store_root, ignore_errors=True)
        store = TimedFileStore(store_root)
        server = Server(args.latency, args.provider_limit, workdir / "judge-server.log")
        setup = judge_setup(server.base_url, args.concurrency)
        print(f"workdir {workdir} · judge server {server.base_url}", flush=True)

        first = judge_once("bench-judged", server, store, compiled, outputs, setup)
        print(f"  judged run: {first.wall:.2f} s, {first.judgement.calls} calls", flush=True)
        check(first, args.cases, 0, args.cases, args.cases)
        cached = judge_once("bench-cached", server, store, compiled, outputs, setup)
        print(f"  cached run: {cached.wall:.2f} s, {cached.judgement.calls} calls", flush=True)
        check(cached, 0, args.cases, 0, args.cases)
    except BenchError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
        if temporary:
            shutil.rmtree(workdir, ignore_errors=True)

    report(args, first, cached)
    return 0


if __name__ == "__main__":
    sys.exit(main())
