"""Dask benchmark: a run's chunks on threads, on 1 and on 2 Dask worker processes (#36 item 7).

Against one lasting Prefect server (`assay server start`, its own PREFECT_HOME and store) and,
for the judged workload, the scripted judge server of bench_judge.py (its own process), runs
`assay run SUITE --outputs OUT --local --json` (in-process: the flow runs in the command's
process, the chunks on its runner) with each runner:

- `threads`: the default (four threads in the command's process);
- `--workers 1`, `--workers 2`: a temporary Dask `LocalCluster` of single-threaded processes;

on two workloads:

1. **deterministic** — bench_scale.py's generated suites (three checks a case) at `--small` and
   `--cases` cases, chunks of 2,000: the small run gives the fixed cost (cluster start, each
   worker importing and compiling the suite), the difference the marginal cost of the extra cases;
2. **judge-bound** — bench_judge.py's suite (`--judge-cases`, one `llm_judge` check a case) in
   chunks of `--judge-chunk`, the judge answering in `--latency` s, `ASSAY_JUDGE_CONCURRENCY`
   `--concurrency` **per process** (the window is per process: K workers keep up to K windows in
   flight, docs/scale.md), `--fresh-judge` so that every verdict is a call.

Prints each run's wall time, the CPU seconds of its whole process tree (the command, its Dask
scheduler and workers; the lasting servers are not counted), the speed-up over one worker, the
judge server's most calls in flight, and the load average. Every run's counts are checked (every
case counted and passed as generated; every judged case one call): exit 1 otherwise, else 0
whatever the figures say (a measurement, not a test).

    .venv/bin/python bench/bench_dask.py [--cases 100000] [--small 1000] [--workers 2]
        [--judge-cases 1000] [--judge-chunk 100] [--concurrency 8] [--latency 0.1]
        [--only deterministic judge] [--workdir bench/.work/dask]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from bench_cli import free_port
from bench_judge import Server
from bench_judge import generate as generate_judged
from bench_scale import BenchError, Generated, generate

ROOT = Path(__file__).resolve().parents[1]
ASSAY = [sys.executable, "-m", "assay.cli"]
WORKLOADS = ("deterministic", "judge")
POLL_SECONDS = 0.1


@dataclass
class Sample:
    workload: str
    runner: str
    wall: float
    cpu: float
    """CPU seconds of the command's process tree (its Dask scheduler and workers included)."""
    metrics: dict[str, Any]
    in_flight: int = 0
    """The most judge calls the judge server served at once (judged runs)."""


def run_tree(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds of the process tree, and stdout of one command.

    The tree's CPU is each process's last reading, sampled every 0.1 s (a worker's last 0.1 s
    before it exits may be missed), plus what the root's waited-for children report at its end.
    """
    started = time.perf_counter()
    process = psutil.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    seen: dict[int, float] = {}
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):
            for member in [process, *process.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    times = member.cpu_times()
                    seen[member.pid] = times.user + times.system
        time.sleep(POLL_SECONDS)
    wall = time.perf_counter() - started
    out, errors = process.communicate()
    if process.returncode not in (0, 1):
        tail = errors.decode(errors="replace")[-3000:]
        raise BenchError(f"{' '.join(command[2:5])}: exit {process.returncode}\n{tail}")
    return wall, sum(seen.values()), out.decode()


def assay_run(
    suite: Path, outputs: Path, subject: str, env: dict[str, str], *flags: str
) -> tuple[float, float, dict[str, Any]]:
    command = [
        *ASSAY,
        "run",
        str(suite),
        "--outputs",
        str(outputs),
        "--subject",
        subject,
        "--local",
        "--json",
        *flags,
    ]
    wall, cpu, out = run_tree(command, env)
    metrics: dict[str, Any] = json.loads(out)["metrics"]
    return wall, cpu, metrics


def runners(workers: int) -> list[tuple[str, list[str]]]:
    counts = sorted({1, workers})
    return [("threads", [])] + [
        (f"{k} worker{'s' if k > 1 else ''}", ["--workers", str(k)]) for k in counts
    ]


def deterministic(
    env: dict[str, str], small: Generated, large: Generated, workers: int
) -> list[Sample]:
    samples = []
    for data in (small, large):  # each published once: the measured runs re-run it
        assay_run(data.suite, data.outputs, "agent:publish", env)
    for name, flags in runners(workers):
        for data in (small, large):
            subject = f"agent:{name.replace(' ', '-')}-{data.cases}"
            wall, cpu, metrics = assay_run(
                data.suite, data.outputs, subject, env, "--chunk-size", "2000", *flags
            )
            if (metrics["cases"], metrics["passed"]) != (data.cases, data.passes):
                raise BenchError(f"{name}, {data.cases} cases: counted {metrics}")
            samples.append(Sample(f"{data.cases:,} cases", name, wall, cpu, metrics))
            print(f"  {samples[-1].workload:<22} {name:<10} {wall:7.2f} s  CPU {cpu:7.2f} s")
    return samples


def judged(args: argparse.Namespace, env: dict[str, str], workdir: Path) -> list[Sample]:
    suite, outputs = generate_judged(workdir, args.judge_cases)
    server = Server(args.latency, None, workdir / "judge-server.log")
    judge_env = env | {
        "ASSAY_JUDGE_MODEL": "bench-judge",
        "ASSAY_JUDGE_CONCURRENCY": str(args.concurrency),
        "OPENAI_API_KEY": "sk-bench",
        "OPENAI_BASE_URL": server.base_url,
    }
    workload = f"{args.judge_cases:,} judged cases"
    samples = []
    try:
        assay_run(suite, outputs, "agent:publish", judge_env)  # publishes it, warms the judge
        for name, flags in runners(args.workers):
            server.reset()
            subject = f"agent:judged-{name.replace(' ', '-')}"
            wall, cpu, metrics = assay_run(
                suite,
                outputs,
                subject,
                judge_env,
                "--fresh-judge",
                "--chunk-size",
                str(args.judge_chunk),
                *flags,
            )
            stats = server.stats()
            calls = (metrics["judge_calls"], int(stats["requests"]), metrics["passed"])
            if calls != (args.judge_cases,) * 3:
                raise BenchError(f"{name}: (calls, server requests, passed) = {calls}")
            samples.append(Sample(workload, name, wall, cpu, metrics, int(stats["max_in_flight"])))
            print(
                f"  {workload:<22} {name:<10} {wall:7.2f} s  CPU {cpu:7.2f} s  "
                f"at most {samples[-1].in_flight} calls at the judge at once"
            )
    finally:
        server.stop()
    return samples


def report(args: argparse.Namespace, samples: list[Sample], loads: list[str]) -> None:
    print(
        f"\nmachine: nproc {os.cpu_count()} · load average {' → '.join(loads)} · judge "
        f"{args.latency * 1000:.0f} ms a call, concurrency {args.concurrency} per process, chunks "
        f"of {args.judge_chunk}"
    )
    header = f"{'workload':<24}{'runner':<12}{'wall (s)':>10}{'CPU (s)':>10}{'vs 1 worker':>13}"
    print(header)
    print("-" * len(header))
    one = {s.workload: s.wall for s in samples if s.runner == "1 worker"}
    for s in samples:
        flight = f"   {s.in_flight} at once" if s.in_flight else ""
        print(
            f"{s.workload:<24}{s.runner:<12}{s.wall:>10.2f}{s.cpu:>10.2f}"
            f"{one[s.workload] / s.wall:>12.2f}x{flight}"
        )
    by = {(s.workload, s.runner): s for s in samples}
    sizes = [w for w in dict.fromkeys(s.workload for s in samples) if w.endswith(" cases")]
    sizes = [w for w in sizes if "judged" not in w]
    if len(sizes) == 2:
        small, large = sizes
        print()
        for runner in dict.fromkeys(s.runner for s in samples if s.workload == large):
            fixed, whole = by[(small, runner)], by[(large, runner)]
            marginal = whole.wall - fixed.wall
            print(
                f"{runner:<12} fixed {fixed.wall:6.2f} s · marginal {marginal:6.2f} s wall, "
                f"{whole.cpu - fixed.cpu:6.2f} s CPU"
            )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--judge-cases", type=int, default=1_000)
    parser.add_argument("--judge-chunk", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=8, help="judge calls per process")
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--only", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".work" / "dask")
    args = parser.parse_args(argv)
    if not 0 < args.small < args.cases or args.workers < 2:
        parser.error("need 0 < --small < --cases and --workers >= 2")

    for name in ("NO_PROXY", "no_proxy"):  # the judge server is on 127.0.0.1
        os.environ[name] = "127.0.0.1,localhost"
    workdir = args.workdir.resolve()
    shutil.rmtree(workdir, ignore_errors=True)
    (workdir / "home").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env |= {
        "PREFECT_HOME": str(workdir / "home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "ASSAY_STORE": f"file://{workdir / 'store'}",
    }
    loads = [f"{os.getloadavg()[0]:.1f}"]
    samples: list[Sample] = []
    port = str(free_port())
    subprocess.run([*ASSAY, "server", "start", "--port", port], env=env, check=True)
    try:
        if "deterministic" in args.only:
            small, large = generate(workdir, args.small), generate(workdir, args.cases)
            samples += deterministic(env, small, large, args.workers)
        if "judge" in args.only:
            samples += judged(args, env, workdir)
    except BenchError as exc:
        print(f"\nBENCHMARK FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        subprocess.run([*ASSAY, "server", "stop"], env=env, capture_output=True)
    loads.append(f"{os.getloadavg()[0]:.1f}")
    report(args, samples, loads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
