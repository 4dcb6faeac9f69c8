"""OTLP endpoint benchmark: spans per second accepted by `POST /v1/traces`, bounded loopback load.

Builds one export request the way an instrumented agent's SDK does: the tests' tiny agent
(`tests/otel_agent.py`: a root span, a `chat` span and a tool span per session, text in every
attribute) traced by the real OpenTelemetry SDK, encoded by the SDK's OTLP encoder into a batch
of `--batch` spans (512: `BatchSpanProcessor`'s default). Then:

1. in process: `assay.monitor.receiver.receive` (decode, signals, one write-once store object per
   request) on a local `FileStore`, `--requests` times — the ceiling without HTTP;
2. over HTTP: a real `assay serve` process on loopback (or `--url` with `--token`), `--requests`
   requests from `--concurrency` client threads (httpx, keep-alive), protobuf and then JSON.

Prints spans/s, requests/s, p50/p95 latency per request, and HTTP/in-process ratios.

Then traces as candidate outputs: `--cases` outputs written as JSONL and as a Collector-style
trace export (JSON Lines of documents of `--batch` spans, made by the SDK's encoder), each
indexed and read back through `assay.outputs` (`index_outputs` + `read_slice`, chunks of 2,000):
cases/s for both and the ratio.

    python bench/bench_otlp.py [--requests 200] [--concurrency 4] [--batch 512] [--cases 20000]

Exit status 0 when every request was accepted with nothing rejected and every root span became
one stored signal; 1 otherwise. A measurement, not a test: no goal is enforced.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # `tests.otel_agent` and the packages, run from anywhere
    sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from google.protobuf.json_format import MessageToJson  # noqa: E402
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

from assay.gate.access import Tier, add_principal  # noqa: E402
from assay.monitor.receiver import JSON, PROTOBUF, receive  # noqa: E402
from assay.monitor.spans import PendingUsage  # noqa: E402
from assay.outputs.index import index_outputs  # noqa: E402
from assay.outputs.slices import read_slice  # noqa: E402
from assay.store import FileStore  # noqa: E402
from tests.otel_agent import agent_traces, otlp_json, run_sessions  # noqa: E402
from tests.servers import ServerProcess, free_port  # noqa: E402

SPANS_PER_SESSION = 3
SERVE_START_SECONDS = 180.0


@dataclass
class Figures:
    name: str
    requests: int
    spans: int
    wall: float
    latencies: list[float]

    @property
    def spans_per_second(self) -> float:
        return self.spans / self.wall

    def line(self) -> str:
        ms = sorted(x * 1000 for x in self.latencies)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
        return (
            f"{self.name:<22} {self.spans_per_second:>10,.0f} spans/s  "
            f"{self.requests / self.wall:>7,.1f} req/s  p50 {statistics.median(ms):6.1f} ms  "
            f"p95 {p95:6.1f} ms  ({self.requests} requests, {self.spans:,} spans, "
            f"{self.wall:.2f} s)"
        )


def export_request(batch: int) -> tuple[bytes, bytes, int]:
    """One OTLP export request of about `batch` spans: protobuf and JSON bodies, root spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "bench-bot", "service.version": "v1"})
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sessions = max(1, batch // SPANS_PER_SESSION)
    run_sessions(
        provider.get_tracer("bench"),
        [(n % 10 == 0, (400 + n, 50), 0.001) for n in range(sessions)],
    )
    provider.shutdown()
    spans = exporter.get_finished_spans()
    message = encode_spans(spans)
    roots = sum(1 for span in spans if span.parent is None)
    return message.SerializeToString(), MessageToJson(message, indent=None).encode(), roots


def in_process(body: bytes, spans: int, requests: int, root: Path) -> Figures:
    store, pending = FileStore(root / "warm-up"), PendingUsage()
    receive(store, body, PROTOBUF, None, pending, limit=64 << 20)  # imports, first decode
    store, pending = FileStore(root / "measured"), PendingUsage()
    latencies = []
    start = time.perf_counter()
    for _ in range(requests):
        began = time.perf_counter()
        receipt = receive(store, body, PROTOBUF, None, pending, limit=64 << 20)
        latencies.append(time.perf_counter() - began)
        assert receipt.batch.rejected_spans == 0
    return Figures(
        "in process (protobuf)", requests, spans * requests, time.perf_counter() - start, latencies
    )


def over_http(
    name: str, url: str, token: str, body: bytes, kind: str, spans: int, requests: int, workers: int
) -> Figures:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": kind}

    def send(count: int) -> list[float]:
        times = []
        with httpx.Client(timeout=60) as client:
            for _ in range(count):
                began = time.perf_counter()
                answer = client.post(f"{url}/v1/traces", content=body, headers=headers)
                times.append(time.perf_counter() - began)
                if answer.status_code != 200 or answer.content not in (b"", b"{}"):
                    raise RuntimeError(f"{answer.status_code}: {answer.text[:200]}")
        return times

    shares = [requests // workers + (1 if i < requests % workers else 0) for i in range(workers)]
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        latencies = [t for part in pool.map(send, shares) for t in part]
    return Figures(name, requests, spans * requests, time.perf_counter() - start, latencies)


def read_outputs(uri: str, ids: list[str]) -> tuple[int, float]:
    """Cases read and seconds taken to index and read every output of `uri`."""
    start = time.perf_counter()
    index = index_outputs(uri, set(ids), ids, 2000)
    read = sum(1 for piece in index.slices for _ in read_slice(piece, set(ids)))
    return read, time.perf_counter() - start


def outputs_figures(cases: int, batch: int, work: Path) -> bool:
    rows = [
        {
            "case_id": f"case-{n}",
            "output": f"answer {n}: returns close after 30 days",
            "duration_ms": 500 + n % 300,
            "usage": {"input_tokens": 300 + n % 50, "output_tokens": 40},
        }
        for n in range(cases)
    ]
    ids = [row["case_id"] for row in rows]
    jsonl = work / "outputs.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))
    document = json.loads(otlp_json(agent_traces(rows), indent=None))
    (resource_spans,) = document["resourceSpans"]
    (scope,) = resource_spans["scopeSpans"]
    spans = scope["spans"]
    traces = work / "traces.jsonl"
    with traces.open("w") as handle:
        for i in range(0, len(spans), batch):
            part = {**scope, "spans": spans[i : i + batch]}
            handle.write(json.dumps({"resourceSpans": [{**resource_spans, "scopeSpans": [part]}]}))
            handle.write("\n")
    by_jsonl, jsonl_seconds = read_outputs(str(jsonl), ids)
    by_traces, trace_seconds = read_outputs(str(traces), ids)
    print(
        f"outputs: {cases:,} cases; JSONL {jsonl.stat().st_size / 1e6:.1f} MB, trace export "
        f"{traces.stat().st_size / 1e6:.1f} MB ({len(spans):,} spans)"
    )
    print(
        f"JSONL outputs          {cases / jsonl_seconds:>10,.0f} cases/s  ({jsonl_seconds:.2f} s)"
    )
    print(
        f"OTLP trace export      {cases / trace_seconds:>10,.0f} cases/s  ({trace_seconds:.2f} s)"
        f"  = {jsonl_seconds / trace_seconds:.0%} of JSONL"
    )
    return by_jsonl == by_traces == cases


def stored_signals(root: Path) -> int:
    return sum(path.read_bytes().count(b"\n") for path in (root / "signals").rglob("*.jsonl"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--cases", type=int, default=20000)
    parser.add_argument("--url", help="An already running service (default: start assay serve).")
    parser.add_argument("--token", help="Its operator token (with --url).")
    args = parser.parse_args()

    proto, as_json, roots = export_request(args.batch)
    spans = roots * SPANS_PER_SESSION
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(
        f"request: {spans} spans ({roots} sessions), protobuf {len(proto):,} B, "
        f"JSON {len(as_json):,} B; {args.requests} requests, {args.concurrency} clients"
    )
    with tempfile.TemporaryDirectory(prefix="assay-bench-otlp-") as folder:
        work = Path(folder)
        local = in_process(proto, spans, args.requests, work / "local")
        print(local.line())
        ok = stored_signals(work / "local" / "measured") == roots * args.requests

        store = work / "served"
        server: ServerProcess | None = None
        if args.url:
            url, token = args.url, args.token or ""
        else:
            admin = add_principal(FileStore(store), "bench-admin", Tier.ADMIN)
            token = add_principal(FileStore(store), "bench-agents", Tier.OPERATOR, by_token=admin)
            port = free_port()
            assay = str(Path(sys.executable).with_name("assay"))
            server = ServerProcess(
                [assay, "serve", "--port", str(port), "--store", f"file://{store}"],
                port,
                work / "serve.log",
                # Its own Prefect home: the service starts an ephemeral Prefect API there.
                env={**os.environ, "PREFECT_HOME": str(work / "prefect")},
                timeout=SERVE_START_SECONDS,
            )
            server.start()
            url = server.endpoint_url
        try:
            figures = [
                over_http(
                    f"HTTP protobuf x{args.concurrency}",
                    url,
                    token,
                    proto,
                    PROTOBUF,
                    spans,
                    args.requests,
                    args.concurrency,
                ),
                over_http(
                    f"HTTP JSON x{args.concurrency}",
                    url,
                    token,
                    as_json,
                    JSON,
                    spans,
                    args.requests,
                    args.concurrency,
                ),
                over_http("HTTP protobuf x1", url, token, proto, PROTOBUF, spans, args.requests, 1),
            ]
        finally:
            if server is not None:
                server.stop()
        for row in figures:
            print(
                f"{row.line()}  = {row.spans_per_second / local.spans_per_second:.0%} of in process"
            )
        if server is not None:
            ok = ok and stored_signals(store) == roots * args.requests * len(figures)
    print("stored signals: one per root span" if ok else "MISMATCH in stored signals")
    with tempfile.TemporaryDirectory(prefix="assay-bench-otlp-outputs-") as folder:
        read_ok = outputs_figures(args.cases, args.batch, Path(folder))
    print("every output read back" if read_ok else "MISMATCH in outputs read")
    return 0 if ok and read_ok else 1


if __name__ == "__main__":
    sys.exit(main())
