"""`assay outputs inspect` on traced cases: wall time of the real command, as a user runs it.

Builds `--cases` traced cases the way an instrumented tool-using agent's SDK does (the tests'
agent, `tests/otel_agent.py` `tool_agent_traces`: per case a root span, a model span per step
whose output requests the step's calls, the tool spans, and the answer's model span; traced by
the real OpenTelemetry SDK, written with protobuf's JSON mapping), with a canary in every text
and argument. Then runs `assay outputs inspect FILE --json` (and the table form) as a subprocess
`--repeat` times and prints the median wall time, against the goal (issue #33: under 2 s for
1,000 cases), and whether the canary appeared in what it printed.

    python bench/bench_inspect.py [--cases 1000] [--repeat 5]

Exit status 0 when every run answered, read every case and printed no canary; 1 otherwise. The
time is a measurement, printed with the load average; no goal is enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.otel_agent import otlp_json, tool_agent_traces  # noqa: E402

CANARY = "CANARY-bench-inspect"
GOAL_SECONDS = 2.0


def traced_cases(cases: int) -> str:
    records = [
        {
            "case_id": f"case-{n}",
            "text": f"answer {n} {CANARY}",
            "steps": [
                [("lookup_order", {"order_id": f"{n} {CANARY}"}, False)],
                [
                    ("refund", {"order_id": str(n)}, n % 7 == 0),
                    ("send_email", {"to": CANARY}, False),
                ],
            ],
        }
        for n in range(cases)
    ]
    return otlp_json(tool_agent_traces(records))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    assay = Path(sys.executable).parent / "assay"
    ok = True
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "traces.json"
        path.write_text(traced_cases(args.cases))
        print(f"{args.cases:,} traced cases, {path.stat().st_size / 1e6:.1f} MB of OTLP/JSON")
        for form in (["--json"], []):
            times = []
            for _ in range(args.repeat):
                start = time.perf_counter()
                done = subprocess.run(
                    [str(assay), "outputs", "inspect", str(path), *form],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "COLUMNS": "160"},
                    check=False,
                )
                times.append(time.perf_counter() - start)
                ok = ok and done.returncode == 0 and CANARY not in done.stdout + done.stderr
                if form and done.returncode == 0:
                    ok = ok and len(json.loads(done.stdout)["cases"]) == args.cases
            median = statistics.median(times)
            name = "--json" if form else "table"
            met = "met" if median < GOAL_SECONDS else "NOT met"
            print(
                f"  inspect {name:<6} median {median:.3f} s (min {min(times):.3f}) "
                f"goal < {GOAL_SECONDS:.0f} s {met}"
            )
    print(f"  load average {os.getloadavg()[0]:.2f}; canary printed: {'no' if ok else 'CHECK'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
