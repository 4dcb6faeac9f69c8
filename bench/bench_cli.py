"""First-contact benchmark: how long `assay` makes a user wait, against Prefect's own import time.

Prints, measured on this machine in one go (each a fresh subprocess, wall time):

- `assay --help`;
- a bad-input answer (`assay run` with a malformed line 3 in the outputs: exit 2, no Prefect);
- the yardstick: `python -c "import prefect.flows"` in the same venv;
- the 50-case example `assay run` *cold*, on Prefect's ephemeral API (no server): the first run
  on a fresh PREFECT_HOME (it migrates a new database) and the next one on the same home;
- the same run *warm*, against a lasting server started with `assay server start` (median);
- per case, warm: `assay run` on a small and a large generated suite (`bench_scale.generate`:
  three checks per case), marginal cost (T_large − T_small) / (N_large − N_small), against the
  plain loop doing the same three checks (`bench_scale.floor_loop`).

Goals (issue #14): warm ≤ 3 s and ≤ 2.5× the yardstick; cold ≤ 15 s; bad input ≤ 2 s;
`--help` ≤ 0.5 s; per case ≤ 5× the plain loop. A benchmark, not a test: exit 0 whenever the
measurement succeeded, 1 when a command did not do what it should.

    .venv/bin/python bench/bench_cli.py [--repeat 5] [--cases 100000] [--small 1000]
                                        [--no-scale] [--profile] [--workdir bench/.work/cli]
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench_scale import floor_loop, generate  # the sibling benchmark (run as a script)

ROOT = Path(__file__).resolve().parents[1]
SUITE = ROOT / "examples" / "support-suite.yaml"
OUTPUTS = ROOT / "examples" / "outputs" / "support-bot-v1.jsonl"
ASSAY = [sys.executable, "-m", "assay.cli"]


@dataclass
class Row:
    label: str
    seconds: float
    goal: str = ""
    met: bool | None = None


class BenchError(Exception):
    """A command exited with the wrong code or printed the wrong thing."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(home: Path, store: Path) -> dict[str, str]:
    """No inherited Prefect or Assay settings: nothing points the runs at another server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env.update(
        PREFECT_HOME=str(home),
        ASSAY_STORE=f"file://{store}",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
    )
    return env


def timed(command: list[str], env: dict[str, str], expect: int = 0) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != expect:
        raise BenchError(
            f"{' '.join(command[2:])}: exit {done.returncode}, expected {expect}\n"
            f"{done.stdout[-2000:]}{done.stderr[-2000:]}"
        )
    return seconds


def median_of(repeat: int, action: Callable[[], float]) -> float:
    return statistics.median(action() for _ in range(repeat))


def fresh(folder: Path) -> Path:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def bad_outputs(workdir: Path) -> Path:
    lines = OUTPUTS.read_text(encoding="utf-8").splitlines()
    path = workdir / "bad-outputs.jsonl"
    path.write_text("\n".join([lines[0], lines[1], '{"case_id": "x", "output": ']) + "\n")
    return path


def run_command(suite: str, outputs: Path) -> list[str]:
    return [*ASSAY, "run", suite, "--outputs", str(outputs), "--subject", "agent:bench", "--json"]


def scale_rows(
    workdir: Path, env: dict[str, str], small: int, large: int, profile: bool
) -> list[Row]:
    """Warm marginal cost per case against the plain loop (suites published beforehand, so
    the runs measure scoring, not publishing)."""
    rows: list[Row] = []
    timings: dict[int, float] = {}
    for cases in (small, large):
        data = generate(workdir, cases)
        timed([*ASSAY, "suite", "publish", str(data.suite)], env)
        name = f"bench-scale-{cases}"
        command = run_command(name, data.outputs)
        if profile and cases == large:
            stats = workdir / "profile.pstats"
            command = [
                sys.executable,
                "-m",
                "cProfile",
                "-o",
                str(stats),
                "-m",
                "assay.cli",
                *command[3:],
            ]
        timings[cases] = timed(command, env)
        rows.append(Row(f"warm run, {cases:,} cases", timings[cases]))
    marginal = (timings[large] - timings[small]) / (large - small)
    data = generate(workdir, large)
    floor = floor_loop(data.suite, data.outputs)
    floor_per_case = floor["seconds"] / floor["cases"]
    ratio = marginal / floor_per_case
    rows.append(Row("  marginal per case (µs)", marginal * 1e6))
    rows.append(Row("  plain loop per case (µs)", floor_per_case * 1e6))
    rows.append(Row("  ratio marginal / plain loop", ratio, "≤ 5×", ratio <= 5.0))
    if profile:
        print("\nTop of the profile of the large warm run (cumulative):")
        pstats.Stats(str(workdir / "profile.pstats")).sort_stats("cumulative").print_stats(30)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per median")
    parser.add_argument("--cases", type=int, default=100_000, help="large generated suite")
    parser.add_argument("--small", type=int, default=1_000, help="small generated suite")
    parser.add_argument("--no-scale", action="store_true", help="skip the per-case rows")
    parser.add_argument("--profile", action="store_true", help="cProfile the large warm run")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".work" / "cli")
    args = parser.parse_args(argv)
    workdir = fresh(args.workdir)
    rows: list[Row] = []
    try:
        quiet = clean_env(fresh(workdir / "home-none"), fresh(workdir / "store-none"))
        help_s = median_of(args.repeat, lambda: timed([*ASSAY, "--help"], quiet))
        rows.append(Row("assay --help", help_s, "≤ 0.5 s", help_s <= 0.5))
        bad = bad_outputs(workdir)
        bad_s = median_of(
            args.repeat, lambda: timed([*ASSAY, "run", str(SUITE), "--outputs", str(bad)], quiet, 2)
        )
        rows.append(Row("bad input (exit 2)", bad_s, "≤ 2 s", bad_s <= 2.0))
        yard = median_of(
            args.repeat, lambda: timed([sys.executable, "-c", "import prefect.flows"], quiet)
        )
        rows.append(Row('yardstick: python -c "import prefect.flows"', yard))

        cold_env = clean_env(fresh(workdir / "home-cold"), fresh(workdir / "store-cold"))
        first = timed(run_command(str(SUITE), OUTPUTS), cold_env)
        rows.append(Row("cold run, fresh PREFECT_HOME (new database)", first))
        cold = timed(run_command(str(SUITE), OUTPUTS), cold_env)
        rows.append(Row("cold run, ephemeral API (existing database)", cold, "≤ 15 s", cold <= 15))

        warm_env = clean_env(fresh(workdir / "home-warm"), fresh(workdir / "store-warm"))
        port = free_port()
        timed([*ASSAY, "server", "start", "--port", str(port)], warm_env)
        try:
            timed(run_command(str(SUITE), OUTPUTS), warm_env)  # warm-up: publishes the suite
            warm = median_of(args.repeat, lambda: timed(run_command(str(SUITE), OUTPUTS), warm_env))
            rows.append(
                Row(
                    f"warm run, lasting server (median of {args.repeat})",
                    warm,
                    "≤ 3 s",
                    warm <= 3.0,
                )
            )
            ratio = warm / yard
            rows.append(Row("  ratio warm / yardstick", ratio, "≤ 2.5×", ratio <= 2.5))
            if not args.no_scale:
                rows += scale_rows(workdir, warm_env, args.small, args.cases, args.profile)
        finally:
            subprocess.run([*ASSAY, "server", "stop"], env=warm_env, capture_output=True)
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        load = os.getloadavg()
        print(
            f"\nassay first-contact benchmark · {os.cpu_count()} CPUs · load average "
            f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
        )
        for row in rows:
            unit = "" if "ratio" in row.label or "µs" in row.label else " s"
            mark = "" if row.met is None else ("  met" if row.met else "  NOT MET")
            goal = f"  goal {row.goal}" if row.goal else ""
            print(f"{row.label:<52} {row.seconds:>10.3f}{unit}{goal}{mark}")
    print(json.dumps({row.label.strip(): round(row.seconds, 4) for row in rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
