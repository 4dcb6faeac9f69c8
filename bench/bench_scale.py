"""Scale benchmark: `assay run` on a large suite against a plain-Python floor.

Generates a JSON suite of N cases (three scorers each: `contains`, `regex`, `numeric_range`) and
a JSONL file with one output per case, runs `assay run … --json` on a small and a large suite,
and runs a plain Python loop applying the same three checks (the floor). Prints wall time, peak
RSS (whole process tree, sampled every 50 ms) and the per-case marginal cost

    marginal = (T_large - T_small) / (N_large - N_small)

for both, and compares them with the goals: assay's marginal cost within 10x of the floor's,
and assay's peak RSS under 1 GiB.

    python bench/bench_scale.py [--cases 100000] [--small 1000] [--workdir bench/.work]
    python bench/bench_scale.py --workers 2 [--dask ADDRESS]      # scale-out: 1 vs 2 workers

Scale-out (`--workers N`, `--dask ADDRESS`) measures instead: the small and large suite with 1
and N Dask workers (`assay run --workers K`, and `--dask ADDRESS` when given); a judge-bound
suite (1,000 judged cases, the local judge server at 100 ms a call, chunks of 100, 4 calls in
flight per process: `ASSAY_JUDGE_CONCURRENCY` bounds each process's window) the same way; and
a nightly of 8 jobs (the small suite each) fanned out over 1
and N `prefect worker` processes (`--limit 1` each) of a real `prefect server`. It prints the
wall times and the speed-up over the first row of each workload.

Exit status: 0 when every run succeeded and counted what the generator intended (whatever the
goals say: this is a measurement); 1 when a run failed or a count was wrong.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

SEED = 20240601
FAIL_PROBABILITY = 0.10  # about 90% of cases pass
ORDER_PATTERN = r"\border \d+\b"
# The number assay's numeric_range reads: the first number, thousands separators allowed.
NUMBER_PATTERN = r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
GOAL_RATIO = 10.0
GOAL_RSS_MIB = 1024.0
POLL_SECONDS = 0.05
MIB = 1024 * 1024

# (topic, the word a passing answer must contain, a synonym used when it must not)
TOPICS = [
    ("refund", "refund", "reimbursement"),
    ("replacement", "replacement", "new unit"),
    ("exchange", "exchange", "swap"),
    ("store credit", "store credit", "voucher"),
    ("cancellation", "cancellation", "termination"),
    ("price adjustment", "price adjustment", "partial rebate"),
    ("warranty claim", "warranty", "coverage"),
    ("shipping fee", "shipping fee", "delivery charge"),
]
KEYWORDS = [keyword for _, keyword, _ in TOPICS]
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas"]
GREETINGS = [
    "Thanks for reaching out, and sorry for the trouble.",
    "Hi there, thank you for your patience.",
    "Hello, and thanks for contacting support.",
    "Thank you for getting in touch with us today.",
]
STATES = ["has been approved", "is being processed", "was issued today", "is confirmed"]
FILLERS = [
    "You will see it on your statement within 5 to 7 business days.",
    "A confirmation email is on its way to the address on file.",
    "No further action is needed on your side.",
    "If anything looks wrong, just reply to this message and we will take another look.",
    "We appreciate your patience while our team reviewed the details.",
    "Our team double-checked the items and the payment method used.",
]
CLOSINGS = ["Have a great day!", "Kind regards, the support team.", "Best wishes."]
QUESTIONS = [
    "When will I get it?",
    "Can you confirm the amount?",
    "Is this already approved?",
    "How long does this usually take?",
]


# ---------------------------------------------------------------- generation


@dataclass(frozen=True)
class Generated:
    suite: Path
    outputs: Path
    cases: int
    passes: int


def _make_case(rng: random.Random, index: int) -> tuple[dict[str, Any], str, bool]:
    """One case, its output and whether the output is meant to pass all three checks."""
    topic, keyword, synonym = rng.choice(TOPICS)
    order = rng.randint(10000, 99999)
    amount = round(rng.uniform(5.0, 2500.0), 2)
    low = math.floor(amount) - rng.randint(0, 25)
    high = math.ceil(amount) + rng.randint(0, 25)
    failing = rng.random() < FAIL_PROBABILITY
    mode = rng.choice(("contains", "regex", "range")) if failing else None

    word = synonym if mode == "contains" else keyword
    order_text = f"order #{order}" if mode == "regex" else f"order {order}"
    shown = high + rng.randint(5, 500) + 0.5 if mode == "range" else amount
    parts = [
        rng.choice(GREETINGS),
        f"The {word} of ${shown:,.2f} for your {order_text} {rng.choice(STATES)}.",
    ]
    fillers = rng.sample(FILLERS, k=len(FILLERS))
    while len(" ".join(parts)) < 150 and fillers:
        parts.append(fillers.pop())
    closing = rng.choice(CLOSINGS)
    if len(" ".join([*parts, closing])) <= 300:
        parts.append(closing)
    output = " ".join(parts)

    case = {
        "id": f"case-{index:06d}",
        "input": f"Hi, this is {rng.choice(NAMES)}. About the {topic} for order {order}: "
        f"{rng.choice(QUESTIONS)}",
        "expected": f"Confirms the {topic} of ${amount:,.2f} for order {order}.",
        "scorers": [
            {"contains": keyword},
            {"regex": ORDER_PATTERN},
            {"numeric_range": {"min": low, "max": high}},
        ],
    }
    # Sanity-check the generator's intent with independent stdlib checks.
    number = re.search(NUMBER_PATTERN, output)
    value = float(number.group(0).replace(",", "")) if number else math.nan
    passes = (
        keyword in output and re.search(ORDER_PATTERN, output) is not None and low <= value <= high
    )
    if passes != (mode is None) or not 150 <= len(output) <= 300:
        raise AssertionError(f"generator bug at case {index}: mode={mode} output={output!r}")
    return case, output, passes


def generate(workdir: Path, cases: int) -> Generated:
    """Write suite-N.json and outputs-N.jsonl (seeded: a smaller N is a prefix of a larger)."""
    rng = random.Random(SEED)
    suite_path = workdir / f"suite-{cases}.json"
    outputs_path = workdir / f"outputs-{cases}.jsonl"
    documents = []
    passes = 0
    with outputs_path.open("w", encoding="utf-8") as out:
        for index in range(1, cases + 1):
            case, output, ok = _make_case(rng, index)
            documents.append(case)
            passes += ok
            out.write(json.dumps({"case_id": case["id"], "output": output}) + "\n")
    suite = {
        "suite": f"bench-scale-{cases}",
        "description": f"Scale benchmark: {cases} cases, three scorers each",
        "pass_threshold": 0.8,
        "regression_threshold": 0.05,
        "defaults": [],
        "cases": documents,
    }
    suite_path.write_text(json.dumps(suite), encoding="utf-8")
    return Generated(suite_path, outputs_path, cases, passes)


# ---------------------------------------------------------------- the floor


def floor_loop(suite_path: Path, outputs_path: Path) -> dict[str, Any]:
    """The plain loop: the same three checks, no framework, no evidence written. `seconds` is
    the whole (the suite's JSON parsed and its checks compiled too); `loop_seconds` the loop over
    the outputs alone (each line decoded and checked): a plain loop of the checks, nothing else;
    `loop_cpu_seconds` that loop's CPU time."""
    import re2

    started = time.perf_counter()
    with suite_path.open(encoding="utf-8") as handle:
        suite = json.load(handle)
    number_re = re2.compile(NUMBER_PATTERN)
    patterns: dict[str, Any] = {}
    checks: dict[str, tuple[str, Any, float, float]] = {}
    for case in suite["cases"]:
        needle, pattern, low, high = "", None, -math.inf, math.inf
        for spec in case["scorers"]:
            ((name, value),) = spec.items()
            if name == "contains":
                needle = value
            elif name == "regex":
                pattern = patterns.get(value) or patterns.setdefault(value, re2.compile(value))
            elif name == "numeric_range":
                low, high = value.get("min", -math.inf), value.get("max", math.inf)
            else:
                raise ValueError(f"floor does not know scorer {name!r}")
        checks[case["id"]] = (needle, pattern, low, high)
    cases = passed = 0
    looping, looping_cpu = time.perf_counter(), time.process_time()
    with outputs_path.open(encoding="utf-8") as handle:
        for line in handle:
            record = json.loads(line)
            needle, pattern, low, high = checks[record["case_id"]]
            text = record["output"]
            found = needle in text
            matched = pattern.search(text) is not None
            number = number_re.search(text)
            in_range = number is not None and (
                low <= float(number.group(0).replace(",", "")) <= high
            )
            cases += 1
            passed += found and matched and in_range
    ended = time.perf_counter()
    return {
        "cases": cases,
        "passed": passed,
        "seconds": ended - started,
        "loop_seconds": ended - looping,
        "loop_cpu_seconds": time.process_time() - looping_cpu,
    }


# ---------------------------------------------------------------- measurement


@dataclass
class Measurement:
    label: str
    cases: int
    wall: float
    peak_rss: int  # bytes, whole process tree
    peak_main_rss: int  # bytes, the launched process alone
    stdout: str
    stderr: str
    returncode: int


def measure(
    label: str, cases: int, command: list[str], env: dict[str, str], logs: Path
) -> Measurement:
    """Run `command`, sampling its process tree's RSS every 50 ms; wall time by perf_counter."""
    logs.mkdir(parents=True, exist_ok=True)
    out_path, err_path = logs / f"{label}.stdout", logs / f"{label}.stderr"
    peak = peak_main = 0
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.perf_counter()
        child = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        try:
            root = psutil.Process(child.pid)
        except psutil.NoSuchProcess:
            root = None
        while True:
            if root is not None:
                total = 0
                try:
                    main = root.memory_info().rss
                    total += main
                    peak_main = max(peak_main, main)
                    for process in root.children(recursive=True):
                        with contextlib.suppress(psutil.Error):
                            total += process.memory_info().rss
                except psutil.Error:
                    pass
                peak = max(peak, total)
            try:
                child.wait(timeout=POLL_SECONDS)
                break
            except subprocess.TimeoutExpired:
                continue
        wall = time.perf_counter() - started
    return Measurement(
        label=label,
        cases=cases,
        wall=wall,
        peak_rss=peak,
        peak_main_rss=peak_main,
        stdout=out_path.read_text(encoding="utf-8", errors="replace"),
        stderr=err_path.read_text(encoding="utf-8", errors="replace"),
        returncode=child.returncode,
    )


def _assay_command() -> list[str]:
    beside = Path(sys.executable).with_name("assay")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("assay")
    if found is None:
        raise SystemExit("cannot find the `assay` console script (activate the venv)")
    return [found]


def _fresh_env(workdir: Path, label: str) -> dict[str, str]:
    """A fresh file store and a fresh PREFECT_HOME (ephemeral Prefect), no inherited Prefect."""
    store = workdir / "runs" / label / "store"
    home = workdir / "runs" / label / "prefect-home"
    for folder in (store, home):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env.update(
        ASSAY_STORE=f"file://{store}",
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    return env


class BenchError(Exception):
    """A run failed or counted something other than what the generator intended."""


def run_assay(workdir: Path, data: Generated, label: str) -> Measurement:
    command = [
        *_assay_command(),
        "run",
        str(data.suite),
        "--outputs",
        str(data.outputs),
        "--subject",
        "agent:bench",
        "--json",
    ]
    result = measure(label, data.cases, command, _fresh_env(workdir, label), workdir / "logs")
    if result.returncode != 0:
        raise BenchError(
            f"{label}: `assay run` exited {result.returncode}\n{result.stderr[-4000:]}"
        )
    try:
        metrics = json.loads(result.stdout)["metrics"]
    except (json.JSONDecodeError, KeyError) as exc:
        raise BenchError(
            f"{label}: unreadable --json output ({exc}): {result.stdout[:500]}"
        ) from None
    _check_counts(label, data, metrics.get("cases"), metrics.get("passed"))
    for field in ("missing", "errors", "skipped"):
        if metrics.get(field):
            raise BenchError(f"{label}: expected no {field} cases, got {metrics[field]}")
    return result


def run_floor(workdir: Path, data: Generated, label: str) -> Measurement:
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--floor-only",
        "--suite",
        str(data.suite),
        "--outputs",
        str(data.outputs),
    ]
    result = measure(label, data.cases, command, dict(os.environ), workdir / "logs")
    if result.returncode != 0:
        raise BenchError(f"{label}: floor exited {result.returncode}\n{result.stderr[-4000:]}")
    counts = json.loads(result.stdout)
    _check_counts(label, data, counts["cases"], counts["passed"])
    return result


def _check_counts(label: str, data: Generated, cases: Any, passed: Any) -> None:
    if cases != data.cases or passed != data.passes:
        raise BenchError(
            f"{label}: counted {cases} cases / {passed} passed; the generator wrote "
            f"{data.cases} cases / {data.passes} meant to pass"
        )


# ---------------------------------------------------------------- report


def _mib(value: int) -> float:
    return value / MIB


def _best(runs: list[Measurement]) -> Measurement:
    return min(runs, key=lambda m: m.wall)


def report(
    small: Generated, large: Generated, results: dict[str, list[Measurement]], repeat: int
) -> None:
    print()
    print(
        f"machine: {platform.node()} · nproc {os.cpu_count()} · "
        f"Python {platform.python_version()} ({platform.python_implementation()}) · "
        f"{platform.system()} {platform.machine()}"
    )
    print(
        f"suites: {small.cases} cases ({small.passes} meant to pass) and {large.cases} cases "
        f"({large.passes} meant to pass, {large.passes / large.cases:.1%}); "
        f"3 scorers per case; best of {repeat} run(s) per row"
    )
    print()
    header = f"{'implementation':<16}{'cases':>9}{'wall (s)':>11}{'peak RSS (MiB)':>16}"
    header += f"{'main proc (MiB)':>17}"
    print(header)
    print("-" * len(header))
    for impl in ("assay", "floor"):
        for data in (small, large):
            runs = results[f"{impl}-{data.cases}"]
            best = _best(runs)
            peak = max(m.peak_rss for m in runs)
            main = max(m.peak_main_rss for m in runs)
            print(
                f"{impl:<16}{data.cases:>9}{best.wall:>11.2f}{_mib(peak):>16.1f}{_mib(main):>17.1f}"
            )
    print()

    def marginal(impl: str) -> float:
        t_small = _best(results[f"{impl}-{small.cases}"]).wall
        t_large = _best(results[f"{impl}-{large.cases}"]).wall
        return (t_large - t_small) / (large.cases - small.cases)

    m_assay, m_floor = marginal("assay"), marginal("floor")
    ratio = m_assay / m_floor if m_floor > 0 else math.inf
    assay_peak = max(
        m.peak_rss for key, runs in results.items() if key.startswith("assay") for m in runs
    )
    print(f"marginal cost, assay : {m_assay * 1e6:10.1f} µs/case")
    print(f"marginal cost, floor : {m_floor * 1e6:10.1f} µs/case")
    print(f"ratio assay / floor  : {ratio:10.1f}x")
    print()
    ratio_ok = ratio <= GOAL_RATIO
    rss_ok = _mib(assay_peak) < GOAL_RSS_MIB
    print(
        f"goal: marginal ratio <= {GOAL_RATIO:.0f}x          "
        f"{'PASS' if ratio_ok else 'FAIL'} ({ratio:.1f}x)"
    )
    print(
        f"goal: assay peak RSS < {GOAL_RSS_MIB:.0f} MiB     "
        f"{'PASS' if rss_ok else 'FAIL'} ({_mib(assay_peak):.1f} MiB)"
    )


# ---------------------------------------------------------------- scale-out

SCALE_OUT_WORKLOADS = ("chunks", "judge", "nightly")
JUDGE_CASES = 1_000
JUDGE_LATENCY = 0.1
JUDGE_CHUNK = 100
JUDGE_CONCURRENCY = 4
NIGHTLY_JOBS = 8
WORKER_START_SECONDS = 120.0
NIGHTLY_SCRIPT = (
    "import json, sys\n"
    "from flows.launch import start\n"
    "outcomes = start('nightly', ('bench',), **json.loads(sys.argv[1]))\n"
    "print(json.dumps([o.model_dump() for o in outcomes]))\n"
)


@dataclass
class Row:
    section: str
    label: str
    wall: float


def _runners(workers: int, dask: str | None) -> list[tuple[str, list[str]]]:
    counts = sorted({1, workers})
    runners = [(f"{k} worker{'s' if k > 1 else ''}", ["--workers", str(k)]) for k in counts]
    if dask:
        runners.append((f"cluster {dask}", ["--dask", dask]))
    return runners


def run_parallel(
    workdir: Path,
    label: str,
    suite: Path,
    outputs: Path,
    runner: list[str],
    chunk_size: int,
    extra_env: dict[str, str] | None = None,
) -> tuple[Measurement, dict[str, Any]]:
    """One `assay run … --json` with a chunk runner; its measurement and metrics."""
    command = [
        *_assay_command(),
        "run",
        str(suite),
        "--outputs",
        str(outputs),
        "--subject",
        "agent:bench",
        "--chunk-size",
        str(chunk_size),
        "--json",
        *runner,
    ]
    env = _fresh_env(workdir, label) | (extra_env or {})
    result = measure(label, 0, command, env, workdir / "logs")
    if result.returncode != 0:
        raise BenchError(
            f"{label}: `assay run` exited {result.returncode}\n{result.stderr[-4000:]}"
        )
    return result, json.loads(result.stdout)["metrics"]


def chunk_rows(
    workdir: Path, small: Generated, large: Generated, runners: list[tuple[str, list[str]]]
) -> list[Row]:
    rows = []
    for name, runner in runners:
        for data in (small, large):
            label = f"chunks-{data.cases}-{name.replace(' ', '-').replace('/', '_')}"
            m, metrics = run_parallel(workdir, label, data.suite, data.outputs, runner, 2000)
            _check_counts(label, data, metrics.get("cases"), metrics.get("passed"))
            rows.append(Row(f"{data.cases} cases", name, m.wall))
            print(f"  {label}: {m.wall:.2f} s", flush=True)
    return rows


def judge_rows(workdir: Path, runners: list[tuple[str, list[str]]]) -> list[Row]:
    from bench_judge import MODEL, Server
    from bench_judge import generate as generate_judged

    suite, outputs = generate_judged(workdir, JUDGE_CASES)
    server = Server(JUDGE_LATENCY, None, workdir / "logs" / "judge-server.log")
    env = {
        "ASSAY_JUDGE_MODEL": MODEL,
        "OPENAI_API_KEY": "bench",
        "OPENAI_BASE_URL": server.base_url,
        "ASSAY_JUDGE_CONCURRENCY": str(JUDGE_CONCURRENCY),
    }
    rows = []
    try:
        for name, runner in runners:
            label = f"judge-{name.replace(' ', '-').replace('/', '_')}"
            m, metrics = run_parallel(workdir, label, suite, outputs, runner, JUDGE_CHUNK, env)
            if (metrics["judge_calls"], metrics["passed"]) != (JUDGE_CASES, JUDGE_CASES):
                raise BenchError(f"{label}: expected {JUDGE_CASES} calls and passes: {metrics}")
            rows.append(Row(f"{JUDGE_CASES} judged cases", name, m.wall))
            print(f"  {label}: {m.wall:.2f} s", flush=True)
    finally:
        server.stop()
    return rows


def nightly_rows(workdir: Path, small: Generated, workers: int) -> list[Row]:
    """A nightly of 8 jobs (the small suite, 8 subjects) on 1 and on `workers` process workers,
    each running one flow run at a time, against a real `prefect server` (SQLite)."""
    root = Path(__file__).resolve().parent.parent
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    from tests.prefect_server import (
        api_call,
        pool_and_deployments,
        postgres_bin,
        prefect_server_process,
        throwaway_postgres,
    )

    base = workdir / "runs" / "nightly"
    shutil.rmtree(base, ignore_errors=True)
    base.mkdir(parents=True)
    rows = []
    binaries = postgres_bin()
    with contextlib.ExitStack() as stack:
        # SQLite serialises the writes of concurrent flow runs ("database is locked" retries).
        database = stack.enter_context(throwaway_postgres(binaries)) if binaries else None
        print(f"  nightly: Prefect server on {'PostgreSQL' if database else 'SQLite'}", flush=True)
        server_env = stack.enter_context(
            prefect_server_process(base / "prefect-home", base / "server.log", database)
        )
        env = server_env | {"PREFECT_WORKER_QUERY_SECONDS": "1"}
        api = env["PREFECT_API_URL"]
        pool_and_deployments(env, "nightly-job")
        for count in sorted({1, workers}):
            started = [
                subprocess.Popen(
                    [
                        *(str(Path(sys.executable).with_name("prefect")), "worker", "start"),
                        *("--pool", "assay", "--limit", "1", "--name", f"bench-{count}-{i}"),
                    ],
                    cwd=base,
                    env=env,
                    stdout=(base / f"worker-{count}-{i}.log").open("wb"),
                    stderr=subprocess.STDOUT,
                )
                for i in range(count)
            ]
            try:
                deadline = time.monotonic() + WORKER_START_SECONDS
                while time.monotonic() < deadline:
                    online = api_call(api, "/work_pools/assay/workers/filter", {})
                    names = {w["name"] for w in online if w["status"] == "ONLINE"}
                    if {f"bench-{count}-{i}" for i in range(count)} <= names:
                        break
                    time.sleep(0.5)
                parameters = {
                    "jobs": [
                        {
                            "suite": str(small.suite),
                            "outputs": str(small.outputs),
                            "subject": f"agent:bench-{job}",
                        }
                        for job in range(NIGHTLY_JOBS)
                    ],
                    "store": f"file://{base / f'store-{count}'}",
                    "job_deployment": "suite-run/nightly-job",
                    "max_parallel": NIGHTLY_JOBS,
                    "night": f"bench-{count}",
                }
                label = f"nightly-{count}-workers"
                command = [sys.executable, "-c", NIGHTLY_SCRIPT, json.dumps(parameters)]
                m = measure(label, 0, command, env, workdir / "logs")
                if m.returncode != 0:
                    raise BenchError(f"{label}: nightly exited {m.returncode}\n{m.stderr[-4000:]}")
                outcomes = json.loads(m.stdout.strip().splitlines()[-1])
                if [o["status"] for o in outcomes] != ["completed"] * NIGHTLY_JOBS:
                    raise BenchError(f"{label}: not every job completed: {outcomes}")
                section = f"nightly of {NIGHTLY_JOBS} jobs"
                rows.append(Row(section, f"{count} process workers", m.wall))
                print(f"  {label}: {m.wall:.2f} s", flush=True)
            finally:
                for process in started:
                    process.terminate()
                    process.wait(timeout=30)
    return rows


def report_scale_out(rows: list[Row]) -> None:
    print()
    print(f"machine: {platform.node()} · nproc {os.cpu_count()} · {platform.python_version()}")
    print()
    header = f"{'workload':<24}{'runner':<34}{'wall (s)':>10}{'speed-up':>10}"
    print(header)
    print("-" * len(header))
    first: dict[str, float] = {}
    for row in rows:
        base = first.setdefault(row.section, row.wall)
        print(f"{row.section:<24}{row.label:<34}{row.wall:>10.2f}{base / row.wall:>9.2f}x")
    by = {(r.section, r.label): r.wall for r in rows}
    sections = [s for s in dict.fromkeys(r.section for r in rows) if s.endswith(" cases")]
    small, large = [*sections, "", ""][:2]
    if small and large and large != small:
        print()
        for label in dict.fromkeys(r.label for r in rows if r.section == large):
            if (small, label) in by:
                marginal = by[(large, label)] - by[(small, label)]
                print(f"{label:<34} fixed {by[(small, label)]:6.2f} s · marginal {marginal:6.2f} s")


def scale_out(args: argparse.Namespace, workdir: Path, small: Generated, large: Generated) -> int:
    runners = _runners(args.workers or 1, args.dask)
    rows: list[Row] = []
    try:
        if not args.no_warmup:
            run_parallel(workdir, "warmup", small.suite, small.outputs, runners[0][1], 2000)
        if "chunks" in args.only:
            rows += chunk_rows(workdir, small, large, runners)
        if "judge" in args.only:
            rows += judge_rows(workdir, runners)
        if "nightly" in args.only:
            rows += nightly_rows(workdir, small, args.workers or 1)
    except BenchError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1
    report_scale_out(rows)
    return 0


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000, help="large suite size")
    parser.add_argument("--small", type=int, default=1_000, help="small suite size")
    parser.add_argument("--workdir", type=Path, default=Path(__file__).resolve().parent / ".work")
    parser.add_argument("--repeat", type=int, default=1, help="runs per row; the fastest counts")
    parser.add_argument(
        "--no-warmup", action="store_true", help="skip the unmeasured warm-up `assay run`"
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="scale-out: 1 vs N local Dask workers (chunks, judge-bound) and process workers "
        "(a nightly of 8 jobs), instead of the floor comparison",
    )
    parser.add_argument(
        "--dask", metavar="ADDRESS", help="scale-out: also measure on this existing Dask cluster"
    )
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SCALE_OUT_WORKLOADS,
        default=list(SCALE_OUT_WORKLOADS),
        help="scale-out: measure only these workloads",
    )
    parser.add_argument("--floor-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--suite", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--outputs", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.floor_only:
        if args.suite is None or args.outputs is None:
            parser.error("--floor-only needs --suite and --outputs")
        print(json.dumps(floor_loop(args.suite, args.outputs)))
        return 0

    if not 0 < args.small < args.cases:
        parser.error("need 0 < --small < --cases")
    workdir: Path = args.workdir.resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"workdir {workdir}", flush=True)

    started = time.perf_counter()
    small = generate(workdir, args.small)
    large = generate(workdir, args.cases)
    print(
        f"generated {small.cases} + {large.cases} cases in {time.perf_counter() - started:.1f} s "
        f"({large.suite.stat().st_size / MIB:.1f} MiB suite, "
        f"{large.outputs.stat().st_size / MIB:.1f} MiB outputs)",
        flush=True,
    )

    if args.workers or args.dask:
        return scale_out(args, workdir, small, large)
    results: dict[str, list[Measurement]] = {}
    try:
        if not args.no_warmup:
            warm = run_assay(workdir, small, "warmup")
            print(f"warm-up assay run ({small.cases} cases): {warm.wall:.2f} s", flush=True)
        for attempt in range(1, args.repeat + 1):
            for data in (small, large):
                for impl, runner in (("assay", run_assay), ("floor", run_floor)):
                    key = f"{impl}-{data.cases}"
                    m = runner(workdir, data, f"{key}-{attempt}")
                    results.setdefault(key, []).append(m)
                    print(
                        f"  {key} (run {attempt}): {m.wall:.2f} s, "
                        f"peak RSS {_mib(m.peak_rss):.1f} MiB",
                        flush=True,
                    )
    except BenchError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1

    report(small, large, results, args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
