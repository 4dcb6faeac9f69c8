"""Where a deterministic case's CPU goes on the in-process path, part by part (issue #36 item 5).

`bench_cli.py` measures the warm per-case cost end to end; cProfile of that run sees only the
main thread, while chunks are scored on the flow's worker threads. This script runs the same
parts in one thread on bench_scale.py's generated suite, each timed with `time.process_time()`
(CPU, so a loaded machine moves it less than wall time) and divided by the cases:

- the suite file re-run: recognised by its bytes and loaded (`publish_or_resolve`) — the first
  re-run validates it from the store and keeps the user's local copy (`assay.suites.local_cache`,
  shown apart, not in the sum), the measured one loads that copy;
- the outputs indexed (`index_run_outputs`);
- a chunk's slice read (`read_slice`), each case's compiled scorers looked up, the checks run,
  the case rule (`_checked`), the output's keyed hash, each case's evidence built
  (`score_outputs` does all of these), the chunk's evidence serialised, its tally;
- the plain loop of the same checks (`bench_scale.floor_loop`, its CPU), for the ratio.

    .venv/bin/python bench/bench_per_case.py [--cases 100000] [--workdir bench/.work/per-case]
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench_scale import floor_loop, generate  # noqa: E402

from assay.hashing import OutputHasher, store_secret  # noqa: E402
from assay.outputs.reference import OutputsReference  # noqa: E402
from assay.outputs.slices import read_slice  # noqa: E402
from assay.process_state import reset_process_state  # noqa: E402
from assay.runs.chunks import EvidenceChunk  # noqa: E402
from assay.runs.metrics import tally  # noqa: E402
from assay.runs.sampling import index_run_outputs  # noqa: E402
from assay.runs.scoring import CompiledSuite, _checked, _outcomes, score_outputs  # noqa: E402
from assay.scorers import Observation  # noqa: E402
from assay.store import FileStore  # noqa: E402
from assay.suites import local_cache, registry  # noqa: E402
from assay.suites.registry import SuiteVersion  # noqa: E402
from assay.suites.suite import Suite  # noqa: E402

T = TypeVar("T")
CHUNK = 2000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".work" / "per-case")
    args = parser.parse_args(argv)
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    data = generate(args.workdir, args.cases)
    store = FileStore(args.workdir / "store")
    os.environ[local_cache.CACHE_DIR_ENV] = str(args.workdir / "cache")
    registry.publish_or_resolve(store, str(data.suite))  # the measured loads are re-runs'
    n = data.cases
    rows: list[tuple[str, float]] = []

    def timed(label: str, action: Callable[[], T]) -> T:
        started = time.process_time()
        result = action()
        rows.append((label, (time.process_time() - started) / n * 1e6))
        return result

    def rerun() -> tuple[SuiteVersion, Suite]:
        reset_process_state()  # a re-run is a new process: no suite in memory
        return registry.publish_or_resolve(store, str(data.suite))

    timed("(first re-run: validates, keeps copy)", rerun)
    _, suite = timed("suite re-run: load", rerun)
    reference = OutputsReference(location=str(data.outputs))
    index = timed("outputs index", lambda: index_run_outputs(suite, reference, None, 0, CHUNK))
    compiled = CompiledSuite.compile(suite)
    hasher = OutputHasher(store_secret(store))
    gc.disable()  # as a deterministic chunk is scored (`tasks.scoring`, `gc_paused`)
    selected = frozenset(compiled.cases)
    outputs = timed(
        "read slices", lambda: [o for p in index.slices for o in read_slice(p, selected)]
    )
    found = timed("  scorers looked up", lambda: [compiled.scorers[o.case_id] for o in outputs])
    seen = [Observation(o.output, o.trajectory, o.unseen) for o in outputs]
    ran = timed(
        "  checks run",
        lambda: [
            _outcomes(o.case_id, s, v, None) for o, s, v in zip(outputs, found, seen, strict=True)
        ],
    )
    timed("  case rule", lambda: [_checked(r, compiled.scorers.passed) for r in ran])
    timed("  keyed output hash", lambda: [hasher(o.output) for o in outputs])
    cases = timed(
        "score_outputs (all of the above)", lambda: score_outputs(compiled, outputs, hasher)
    )
    chunks = [
        EvidenceChunk(run_id="bench", chunk=i // CHUNK, cases=cases[i : i + CHUNK])
        for i in range(0, n, CHUNK)
    ]
    timed("evidence serialised", lambda: [c.model_dump_json().encode() for c in chunks])
    timed("tally", lambda: [tally(c.cases) for c in chunks])
    gc.enable()
    floor = floor_loop(data.suite, data.outputs)
    floor_us = floor["loop_cpu_seconds"] / floor["cases"] * 1e6

    print(f"{n:,} cases · CPU µs a case (process_time)")
    for label, micros in rows:
        print(f"  {label:<36} {micros:8.2f}")
    parts = sum(m for label, m in rows if not label.startswith(("  ", "(")))
    print(f"  {'sum (load … tally)':<36} {parts:8.2f}")
    print(
        f"  {'plain loop of the same checks':<36} {floor_us:8.2f}   ratio {parts / floor_us:.1f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
