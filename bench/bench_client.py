"""Client-mode benchmark: a 10-case `assay run` the default way (through the local Assay service
`assay server start` keeps), through a warm service (`ASSAY_URL`), and in-process (`--local`).

Starts the lasting local servers (`assay server start`: Prefect's, and the Assay service on the
command's store) and another `assay serve` on the same Prefect API (a fresh store), writes a
10-case suite (the first 10 cases of the example support-bot suite, as a JSON suite file) and its
v1 outputs, then times, each a fresh subprocess (wall time, median of `--repeat` after one
unmeasured warm-up that publishes the suite):

- default: `assay run SUITE --outputs OUT --subject agent:bench --json` — through the local
  service, the outputs named by path; whether that CLI process imported Prefect is printed,
  with `python -c "import prefect"` alone beside it;
- in-process: the same command with `--local`, the flow run on the lasting server (the CLI's
  warm in-process path); its JSON must equal the default's but for the run's identity;
- client: the same command with `ASSAY_URL` and `ASSAY_TOKEN` set: the CLI publishes the suite
  (200, identical) and posts the outputs inline; the service runs the flow. Timed against an
  idle service (each command starts once the previous run's flow run has ended: the service
  answers when the run is recorded, then publishes its report for ~0.4 s more), and
  back-to-back (the next command overlaps that tail: on a SQLite Prefect server their writes
  collide, and Prefect's client backs off 2 s on the 503);
- what that is made of: the `POST /runs` alone (httpx from this process: the service's flow
  run, idle) and `assay runs show RUN --json` through `ASSAY_URL` (the CLI's own start-up and
  one round trip, no run).

Both must report 10 cases and the same pass count. Goals (issue 24): client ≤ 0.5 s and
≤ 0.3× in-process (measured against the idle service). A benchmark, not a test: exit 0
whenever the measurement succeeded.

    .venv/bin/python bench/bench_client.py [--repeat 7] [--workdir bench/.work/client]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_cli import ASSAY, BenchError, clean_env, free_port, fresh  # noqa: E402

from tests.api_service import Service, start_service  # noqa: E402

CASES = 10


def write_inputs(workdir: Path) -> tuple[Path, Path]:
    """A 10-case suite file and its outputs."""
    document = yaml.safe_load((ROOT / "examples" / "support-suite.yaml").read_text())
    document["suite"] = "bench-ten"
    document["cases"] = document["cases"][:CASES]
    suite = workdir / "suite-10.json"
    suite.write_text(json.dumps(document))
    wanted = {case["id"] for case in document["cases"]}
    lines = (ROOT / "examples" / "outputs" / "support-bot-v1.jsonl").read_text().splitlines()
    kept = [line for line in lines if line.strip() and json.loads(line)["case_id"] in wanted]
    outputs = workdir / "outputs-10.jsonl"
    outputs.write_text("\n".join(kept) + "\n")
    return suite, outputs


def wait_idle(api_url: str, timeout: float = 60.0) -> None:
    """Until the Prefect API has no pending or running flow run (the previous run's tail ended)."""
    body = {"flow_runs": {"state": {"type": {"any_": ["PENDING", "RUNNING"]}}}}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if httpx.post(f"{api_url}/flow_runs/count", json=body, timeout=10).json() == 0:
            return
        time.sleep(0.05)
    raise BenchError("the service's flow runs did not end")


def run_once(command: list[str], env: dict[str, str]) -> tuple[float, dict[str, object]]:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    result: dict[str, object] = json.loads(done.stdout)
    return seconds, result


def measure(
    command: list[str], env: dict[str, str], repeat: int, idle_api: str | None = None
) -> tuple[float, dict[str, object]]:
    """Median wall time; with `idle_api`, each command starts once that API is idle."""
    _, result = run_once(command, env)  # warm-up: publishes the suite, loads caches
    times = []
    for _ in range(repeat):
        if idle_api is not None:
            wait_idle(idle_api)
        seconds, result = run_once(command, env)
        times.append(seconds)
    return statistics.median(times), result


def post_seconds(service: Service, outputs: Path, repeat: int, idle_api: str) -> float:
    """Median wall time of the run's `POST /runs` alone (the suite already published), each
    posted once the service is idle."""
    rows = [json.loads(line) for line in outputs.read_text().splitlines() if line.strip()]
    body = {"suite": "bench-ten", "subject": "agent:bench", "outputs": rows}
    times = []
    with service.client("operator") as client:
        for _ in range(repeat):
            wait_idle(idle_api)
            started = time.perf_counter()
            response = client.post("/runs", json=body)
            times.append(time.perf_counter() - started)
            if response.status_code != 201:
                raise BenchError(f"POST /runs: {response.status_code} {response.text[:500]}")
    return statistics.median(times)


def imports_prefect(command: list[str], env: dict[str, str]) -> bool:
    """Whether `command` (an `assay` command) imports Prefect in its own process."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "assay.cli", *command[len(ASSAY) :]],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    return any(line.rstrip().endswith("| prefect") for line in done.stderr.splitlines())


def import_seconds(module: str, env: dict[str, str], repeat: int) -> float:
    """Median wall time of `python -c "import MODULE"` (interpreter start-up included)."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", f"import {module}"], env=env, check=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def comparable(result: dict[str, object]) -> dict[str, object]:
    """A run's JSON but for its identity, time and comparison with the runs before it."""
    return {k: v for k, v in result.items() if k not in ("run_id", "occurred_at", "regression")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per median")
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".work" / "client")
    args = parser.parse_args(argv)
    workdir = fresh(args.workdir)
    suite, outputs = write_inputs(workdir)
    env = clean_env(fresh(workdir / "home"), fresh(workdir / "store-cli"))
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    subprocess.run([*ASSAY, "server", "start", "--port", str(port)], env=env, check=True)
    service = None
    try:
        service = start_service(
            fresh(workdir / "serve"),
            env={"PREFECT_SERVER_ANALYTICS_ENABLED": "false"},
            prefect_api_url=api,
        )
        command = [*ASSAY, "run", str(suite), "--outputs", str(outputs)]
        command += ["--subject", "agent:bench", "--json"]
        default, default_result = measure(command, env, args.repeat, idle_api=api)
        default_imports_prefect = imports_prefect(command, env)
        prefect_import = import_seconds("prefect", env, args.repeat)
        local, local_result = measure([*command, "--local"], env, args.repeat)
        client_env = {
            **env,
            "ASSAY_URL": service.url,
            "ASSAY_TOKEN": service.tokens["operator"],
            "NO_PROXY": "127.0.0.1",
        }
        remote, remote_result = measure(command, client_env, args.repeat, idle_api=api)
        back_to_back, _ = measure(command, client_env, args.repeat)
        show = [*ASSAY, "runs", "show", str(remote_result["run_id"]), "--json"]
        read_only, _ = measure(show, client_env, args.repeat, idle_api=api)
        flow_only = post_seconds(service, outputs, args.repeat, api)
    except BenchError as exc:
        print(f"benchmark failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if service is not None:
            service.stop()
        subprocess.run([*ASSAY, "server", "stop"], env=env, capture_output=True)
    for result in (default_result, local_result, remote_result):
        metrics = result["metrics"]
        assert isinstance(metrics, dict) and metrics["cases"] == CASES, metrics
    local_passed = local_result["metrics"]["passed"]  # type: ignore[index]
    if remote_result["metrics"]["passed"] != local_passed:  # type: ignore[index]
        print("benchmark failed: the two runs disagree", file=sys.stderr)
        return 1
    if comparable(default_result) != comparable(local_result):
        print("benchmark failed: the default and --local JSON differ", file=sys.stderr)
        return 1
    ratio = remote / local
    rows = [
        ("10-case assay run, default (local service)", default, "≤ 0.5 s", default <= 0.5),
        ("  python -c 'import prefect' alone", prefect_import, ""),
        ("10-case assay run, --local (in-process, lasting server)", local, ""),
        ("10-case assay run, ASSAY_URL (warm, idle service)", remote, "≤ 0.5 s", remote <= 0.5),
        ("10-case assay run, ASSAY_URL, back-to-back", back_to_back, ""),
        ("  of which: POST /runs alone (the service's flow)", flow_only, ""),
        ("  and: assay runs show via ASSAY_URL (no run)", read_only, ""),
    ]
    load = os.getloadavg()
    print(
        f"\nassay client-mode benchmark · {os.cpu_count()} CPUs · load average "
        f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} · median of {args.repeat}"
    )
    for label, seconds, goal, *met in rows:
        mark = "" if not met else ("  met" if met[0] else "  NOT MET")
        print(f"{label:<52} {seconds:>8.3f} s" + (f"  goal {goal}{mark}" if goal else ""))
    label = "  the default run's CLI process imported Prefect"
    print(f"{label:<52} {default_imports_prefect}")
    goal = "met" if ratio <= 0.3 else "NOT MET"
    print(f"{'  ratio client / in-process':<52} {ratio:>8.3f}    goal ≤ 0.3×  {goal}")
    figures: dict[str, float] = {
        "default_s": default,
        "import_prefect_s": prefect_import,
        "in_process_s": local,
        "client_s": remote,
        "client_back_to_back_s": back_to_back,
        "post_s": flow_only,
        "show_s": read_only,
    }
    print(json.dumps({name: round(value, 4) for name, value in figures.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
