"""First-contact benchmark: how long `assay` makes a user wait, against Prefect's own import time.

Prints, measured on this machine in one go (each a fresh subprocess, wall time):

- `assay --help`;
- a bad-input answer (`assay run` with a malformed line 3 in the outputs: exit 2, no Prefect);
- the yardstick: `python -c "import prefect.flows"` in the same venv;
- the 50-case example `assay run` *cold*, on Prefect's ephemeral API (no server): the first run
  on a fresh PREFECT_HOME (it migrates a new database) and the next one on the same home; then
  the 10-case suite of bench_client.py the same way (median; `--profile`: one more under cProfile);
- the same run *warm*, against a lasting server started with `assay server start` (median);
- per case, warm, in-process (`assay run FILE --local` on that server) and by the default
  path (through the local service `assay server start` keeps; the service's RSS): a small and a
  large generated suite file (`bench_scale.generate`: three checks per case), each run once before
  (it publishes the file: the measured runs are re-runs of a published suite file), marginal cost
  (T_large − T_small) / (N_large − N_small), against a plain loop of the same three checks
  (`bench_scale.floor_loop`'s `loop_seconds`: each output line decoded and checked, nothing
  else), and the client's peak RSS.

Goals (issues #14, #36): warm ≤ 3 s and ≤ 2.5× the yardstick; cold ≤ 15 s; bad input ≤ 2 s;
`--help` ≤ 0.5 s; per case ≤ 4× the plain loop; client peak RSS < 500 MiB. A benchmark, not a
test: exit 0 whenever the measurement succeeded, 1 when a command did not do what it should.

    .venv/bin/python bench/bench_cli.py [--repeat 5] [--cases 100000] [--small 1000]
                                        [--no-scale] [--profile] [--workdir bench/.work/cli]
"""

from __future__ import annotations

import argparse
import contextlib
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


def local_service_pid(env: dict[str, str]) -> int:
    """The pid of the local Assay service `assay server start` started with `env`'s store."""
    import psutil

    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info["cmdline"] or []
        if "serve" in cmdline and env["ASSAY_STORE"] in cmdline:
            return int(process.info["pid"])
    raise BenchError("the local Assay service is not running")


def run_command(suite: str, outputs: Path, subject: str = "agent:bench", *flags: str) -> list[str]:
    return [*ASSAY, "run", suite, "--outputs", str(outputs), "--subject", subject, "--json", *flags]


def timed_rss(
    command: list[str], env: dict[str, str], cwd: Path, service: int | None = None
) -> tuple[float, int]:
    """Wall seconds and peak RSS (bytes) of one command: the process itself, sampled every
    50 ms with psutil (the lasting server is another process and is not counted); with
    `service` (a pid), the peak RSS of that process during the command instead — the local
    service runs the flow when the command goes through it."""
    import psutil

    started = time.perf_counter()
    process = psutil.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    watched = process if service is None else psutil.Process(service)
    peak = 0
    while process.poll() is None:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, watched.memory_info().rss)
        time.sleep(0.05)
    seconds = time.perf_counter() - started
    out, errors = process.communicate()
    if process.returncode != 0:
        raise BenchError(
            f"{' '.join(command[2:])}: exit {process.returncode}\n{out[-2000:]}{errors[-2000:]}"
        )
    return seconds, peak


def scale_rows(
    workdir: Path,
    env: dict[str, str],
    small: int,
    large: int,
    profile: bool,
    trees: list[tuple[str, Path]],
    repeat: int,
) -> list[Row]:
    """Warm marginal cost per case against the plain loop, for each code tree in-process
    (`--local`), alternating, `repeat` times, and for this tree by the default path (`service`:
    through the local service `assay server start` keeps, which runs the flow; its peak RSS is
    the service's). Each suite file is run once first both ways, which publishes it, so the
    measured runs are re-runs of a published suite file (recognised by its bytes); each run has
    its own subject, so no run has a baseline to compare with."""
    rows: list[Row] = []
    suites = {cases: generate(workdir, cases) for cases in (small, large)}
    for data in suites.values():
        timed(run_command(str(data.suite), data.outputs, "agent:publish", "--local"), env)
        timed(run_command(str(data.suite), data.outputs, "agent:publish"), env)
    service = local_service_pid(env)
    trees = [*trees, ("service", ROOT)]
    per_case: dict[str, list[float]] = {label: [] for label, _ in trees}
    ratios: dict[str, list[float]] = {label: [] for label, _ in trees}
    peaks: dict[str, list[int]] = {label: [] for label, _ in trees}
    floors: list[float] = []
    for attempt in range(repeat):
        for label, tree in trees:
            timings: dict[int, float] = {}
            for cases, data in suites.items():
                subject = f"agent:bench-{label}-{attempt}"
                path = () if label == "service" else ("--local",)
                command = run_command(str(data.suite), data.outputs, subject, *path)
                if profile and cases == large and attempt == 0 and path:
                    stats = workdir / f"profile-{label}.pstats"
                    command = [sys.executable, "-m", "cProfile", "-o", str(stats), *command[1:]]
                tree_env = {**env, "PYTHONPATH": str(tree)}
                by = service if label == "service" else None
                timings[cases], peak = timed_rss(command, tree_env, tree, by)
                rows.append(
                    Row(f"[{label} #{attempt + 1}] warm run, {cases:,} cases", timings[cases])
                )
            peaks[label].append(peak)
            marginal = (timings[large] - timings[small]) / (large - small)
            per_case[label].append(marginal * 1e6)
        data = suites[large]
        floor = floor_loop(data.suite, data.outputs)
        floors.append(floor["loop_seconds"] / floor["cases"] * 1e6)
        for label, _ in trees:
            ratios[label].append(per_case[label][-1] / floors[-1])
    rows.append(Row("  plain loop per case (µs), median", statistics.median(floors)))
    for label, _ in trees:
        ratio = statistics.median(ratios[label])
        rows.append(
            Row(f"  [{label}] marginal per case (µs), median", statistics.median(per_case[label]))
        )
        rows.append(
            Row(f"  [{label}] ratio marginal / plain loop, median", ratio, "≤ 4×", ratio <= 4.0)
        )
        rows.append(
            Row(f"  [{label}] ratio spread (min–max)", max(ratios[label]) - min(ratios[label]))
        )
        peak = max(peaks[label]) / 2**20
        whose = "the service's" if label == "service" else "client"
        rows.append(
            Row(f"  [{label}] {whose} peak RSS (MiB), {large:,} cases", peak, "< 500", peak < 500)
        )
    print(
        "per-attempt ratios:",
        {label: [round(r, 2) for r in values] for label, values in ratios.items()},
    )
    if profile:
        for label, _ in trees[:-1]:  # the service's flow runs in another process
            print(f"\nTop of the profile of the large warm run, {label} (cumulative):")
            stats = workdir / f"profile-{label}.pstats"
            pstats.Stats(str(stats)).sort_stats("cumulative").print_stats(30)
    return rows


def fixed_rows(workdir: Path, repeat: int, rows: list[Row], profile: bool) -> float:
    """`--help`, bad input, the yardstick and the cold runs; returns the yardstick."""
    quiet = clean_env(fresh(workdir / "home-none"), fresh(workdir / "store-none"))
    help_s = median_of(repeat, lambda: timed([*ASSAY, "--help"], quiet))
    rows.append(Row("assay --help", help_s, "≤ 0.5 s", help_s <= 0.5))
    bad = bad_outputs(workdir)
    bad_s = median_of(
        repeat, lambda: timed([*ASSAY, "run", str(SUITE), "--outputs", str(bad)], quiet, 2)
    )
    rows.append(Row("bad input (exit 2)", bad_s, "≤ 2 s", bad_s <= 2.0))
    yard = median_of(repeat, lambda: timed([sys.executable, "-c", "import prefect.flows"], quiet))
    rows.append(Row('yardstick: python -c "import prefect.flows"', yard))

    cold_env = clean_env(fresh(workdir / "home-cold"), fresh(workdir / "store-cold"))
    first = timed(run_command(str(SUITE), OUTPUTS), cold_env)
    rows.append(Row("cold run, fresh PREFECT_HOME (new database)", first))
    cold = timed(run_command(str(SUITE), OUTPUTS), cold_env)
    rows.append(Row("cold run, ephemeral API (existing database)", cold, "≤ 15 s", cold <= 15))
    from bench_client import write_inputs  # it imports this module: here, not at the top

    suite, outputs = write_inputs(workdir)
    timed(run_command(str(suite), outputs), cold_env)  # publishes the file
    ten = median_of(repeat, lambda: timed(run_command(str(suite), outputs), cold_env))
    rows.append(Row(f"cold run, 10 cases (median of {repeat})", ten))
    if profile:
        stats = workdir / "profile-cold-10.pstats"
        command = run_command(str(suite), outputs)
        timed([sys.executable, "-m", "cProfile", "-o", str(stats), *command[1:]], cold_env)
        print("\nTop of the profile of the cold 10-case run (cumulative):")
        pstats.Stats(str(stats)).sort_stats("cumulative").print_stats(40)
    return yard


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per median")
    parser.add_argument("--cases", type=int, default=100_000, help="large generated suite")
    parser.add_argument("--small", type=int, default=1_000, help="small generated suite")
    parser.add_argument("--no-scale", action="store_true", help="skip the per-case rows")
    parser.add_argument(
        "--profile", action="store_true", help="cProfile the large warm run and a cold 10-case one"
    )
    parser.add_argument(
        "--before",
        type=Path,
        help="another source tree (e.g. `git archive main assay flows tasks blocks deployments`"
        " unpacked): its per-case rows run alternately with this tree's, side by side",
    )
    parser.add_argument("--scale-repeat", type=int, default=1, help="per-case rounds")
    parser.add_argument("--only-scale", action="store_true", help="skip the fixed-cost rows")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".work" / "cli")
    args = parser.parse_args(argv)
    workdir = fresh(args.workdir)
    rows: list[Row] = []
    try:
        yard = 0.0
        if not args.only_scale:
            yard = fixed_rows(workdir, args.repeat, rows, args.profile)

        warm_env = clean_env(fresh(workdir / "home-warm"), fresh(workdir / "store-warm"))
        port = free_port()
        timed([*ASSAY, "server", "start", "--port", str(port)], warm_env)
        try:
            if not args.only_scale:
                timed(run_command(str(SUITE), OUTPUTS), warm_env)  # warm-up: publishes the suite
                warm = median_of(
                    args.repeat, lambda: timed(run_command(str(SUITE), OUTPUTS), warm_env)
                )
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
                trees = [("after", ROOT)] + ([("before", args.before)] if args.before else [])
                rows += scale_rows(
                    workdir,
                    warm_env,
                    args.small,
                    args.cases,
                    args.profile,
                    trees,
                    args.scale_repeat,
                )
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
            unit = "" if any(word in row.label for word in ("ratio", "µs", "MiB")) else " s"
            mark = "" if row.met is None else ("  met" if row.met else "  NOT MET")
            goal = f"  goal {row.goal}" if row.goal else ""
            print(f"{row.label:<52} {row.seconds:>10.3f}{unit}{goal}{mark}")
    print(json.dumps({row.label.strip(): round(row.seconds, 4) for row in rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
