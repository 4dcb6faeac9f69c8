"""HTTP service benchmark: `assay serve` as a real process under bounded loopback load.

Starts `assay serve` (its own ephemeral Prefect API, a fresh local store) on a free port,
publishes the example support-bot suite (50 cases), then measures:

1. reads: 2,000 `GET /runs/{id}` from 32 concurrent clients;
2. runs: 50 `POST /runs` of the 50-case example (inline outputs) from 8 concurrent clients,
   against the default pool (4 runs at once, 16 queued);
3. reads during runs: the read load of (1) again while (2) runs, showing reads do not wait
   behind runs.

For each: throughput (requests/s), p50/p99/max latency, and the count of non-2xx answers (must
be 0). Prints a table and a JSON line; exits 1 when any request was not 2xx.

    .venv/bin/python bench/bench_api.py [--reads 2000] [--read-clients 32]
                                        [--runs 50] [--run-clients 8] [--max-concurrent-runs 4]
                                        [--prefect-api-url URL] [--workdir bench/.work]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import shutil
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.api_service import Service, example_outputs, example_suite, start_service  # noqa: E402


@dataclass
class Phase:
    """Latencies and statuses of one measured phase."""

    name: str
    latencies: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    wall: float = 0.0

    def figures(self) -> dict[str, Any]:
        ordered = sorted(self.latencies)

        def quantile(q: float) -> float:
            return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000

        return {
            "phase": self.name,
            "requests": len(ordered),
            "throughput_rps": round(len(ordered) / self.wall, 1),
            "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(quantile(0.99), 1),
            "max_ms": round(ordered[-1] * 1000, 1),
            "non_2xx": sum(not 200 <= s < 300 for s in self.statuses),
            "wall_s": round(self.wall, 2),
        }


async def _load(
    service: Service,
    phase: Phase,
    clients: int,
    requests: int,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
) -> None:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for number in range(requests):
        queue.put_nowait(number)

    async def client_loop() -> None:
        async with service.async_client("operator") as client:
            while True:
                try:
                    queue.get_nowait()
                except asyncio.QueueEmpty:
                    return
                started = time.perf_counter()
                response = await client.request(method, path, json=body)
                phase.latencies.append(time.perf_counter() - started)
                phase.statuses.append(response.status_code)

    started = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    phase.wall = time.perf_counter() - started


async def _measure(service: Service, run_id: str, args: argparse.Namespace) -> list[Phase]:
    body = {
        "suite": "support-bot",
        "subject": "agent:bench@v2",
        "outputs": example_outputs("v2"),
    }
    reads, runs, during = Phase("GET /runs/{id}"), Phase("POST /runs"), Phase("GET during runs")
    await _load(service, reads, args.read_clients, args.reads, "GET", f"/runs/{run_id}")
    await asyncio.gather(
        _load(service, runs, args.run_clients, args.runs, "POST", "/runs", body),
        _delayed(_load(service, during, args.read_clients, args.reads, "GET", f"/runs/{run_id}")),
    )
    return [reads, runs, during]


async def _delayed(work: Any) -> None:
    await asyncio.sleep(2.0)  # let the runs occupy the pool first
    await work


def _slot_times(log: Path) -> dict[str, float]:
    """Queue wait and flow time of each run, from the service's `run slot` log lines."""
    pattern = re.compile(r"run slot: waited ([\d.]+)s, ran ([\d.]+)s")
    found = [tuple(map(float, m.groups())) for m in pattern.finditer(log.read_text())]
    if not found:
        return {}
    waits, runs = sorted(w for w, _ in found), sorted(r for _, r in found)

    def at(values: list[float], q: float) -> float:
        return round(values[min(len(values) - 1, int(q * len(values)))], 2)

    return {
        "wait_p50_s": at(waits, 0.5),
        "wait_p99_s": at(waits, 0.99),
        "run_p50_s": at(runs, 0.5),
        "run_p99_s": at(runs, 0.99),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reads", type=int, default=2000)
    parser.add_argument("--read-clients", type=int, default=32)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--run-clients", type=int, default=8)
    parser.add_argument("--max-concurrent-runs", type=int, default=4, help="the service's pool")
    parser.add_argument(
        "--prefect-api-url",
        help="Run on this Prefect server (e.g. one on PostgreSQL) instead of an ephemeral API",
    )
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".work")
    args = parser.parse_args()
    root = args.workdir / "api"
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    service = start_service(
        root,
        "--max-concurrent-runs",
        str(args.max_concurrent_runs),
        prefect_api_url=args.prefect_api_url,
    )
    startup = time.perf_counter() - started
    try:
        with service.client("operator") as client:
            client.post("/suites", json=example_suite()).raise_for_status()
            warm = client.post(
                "/runs",
                json={
                    "suite": "support-bot",
                    "subject": "agent:bench@v1",
                    "outputs": example_outputs("v1"),
                },
            )
            warm.raise_for_status()
        phases = asyncio.run(_measure(service, warm.json()["run_id"], args))
    finally:
        service.stop()
    figures = [phase.figures() for phase in phases]
    print(
        f"assay serve on {platform.node()} ({os.cpu_count()} cores), "
        f"--max-concurrent-runs {args.max_concurrent_runs}, Prefect API "
        f"{args.prefect_api_url or 'ephemeral (SQLite)'}, start-up {startup:.1f} s"
    )
    header = f"{'phase':<18}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
    print(header + f"{'max ms':>9}{'non-2xx':>9}")
    for row in figures:
        print(
            f"{row['phase']:<18}{row['requests']:>9}{row['throughput_rps']:>9}{row['p50_ms']:>9}"
            f"{row['p99_ms']:>9}{row['max_ms']:>9}{row['non_2xx']:>9}"
        )
    slots = _slot_times(service.log)
    if slots:
        print(
            "POST /runs split (server log): queue wait p50/p99 "
            f"{slots['wait_p50_s']}/{slots['wait_p99_s']} s, "
            f"flow p50/p99 {slots['run_p50_s']}/{slots['run_p99_s']} s"
        )
    print(json.dumps({"startup_s": round(startup, 1), "phases": figures, "run_slots": slots}))
    return 1 if any(row["non_2xx"] for row in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
