"""Redaction benchmark: what redacting a judged check costs before its prompt is sent.

Every `llm_judge` check redacts its input, reference answer and output (`assay.judge.redaction`)
in the judge adapter, on the event loop that drives the calls. Generates realistic support
texts (seeded), half of them holding one planted value of some kind, and times
`Redactor.request` on each check, per setting (each kind alone, all four, off). Prints the mean
microseconds per check and per KiB of text, and the share of a judge call's latency that
redaction takes (default latency 500 ms, concurrency 16: checks per second the loop must redact).

    python bench/bench_redaction.py [--checks 2000] [--latency 0.5] [--concurrency 16]

Exit status: 0 when the measurement ran and every planted value was redacted; 1 otherwise.
"""

from __future__ import annotations

import argparse
import platform
import random
import sys
import time

from assay.judge.port import JudgeRequest
from assay.judge.redaction import RedactionSettings, Redactor

WORDS = (
    "your",
    "order",
    "refund",
    "within",
    "thirty",
    "days",
    "store",
    "credit",
    "receipt",
    "shipping",
    "label",
    "we",
    "are",
    "sorry",
    "the",
    "item",
    "arrived",
    "damaged",
    "please",
    "reply",
    "with",
    "a",
    "photo",
    "and",
    "we",
    "will",
    "send",
    "a",
    "replacement",
    "today",
)
PLANTS = {
    "email": "mia.lopez@example.org",
    "phone": "(415) 555-2671",
    "credit_card": "4242 4242 4242 4242",
    "secret": "AKIAIOSFODNN7EXAMPLE",
}


def text(rng: random.Random, words: int, plant: str | None) -> str:
    body = [rng.choice(WORDS) for _ in range(words)]
    if plant is not None:
        body.insert(rng.randrange(len(body)), plant)
    return " ".join(body)


def checks(count: int, seed: int) -> list[tuple[JudgeRequest, str | None]]:
    rng = random.Random(seed)
    made = []
    for index in range(count):
        plant = rng.choice(list(PLANTS.values())) if index % 2 else None
        made.append(
            (
                JudgeRequest(
                    case_id=f"c{index}",
                    input=text(rng, 25, None),
                    expected=text(rng, 20, None),
                    rubric="Offers store credit and states the 30-day window.",
                    output=text(rng, 60, plant),
                ),
                plant,
            )
        )
    return made


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checks", type=int, default=2000)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    made = checks(args.checks, args.seed)
    kib = sum(len(r.input) + len(r.expected or "") + len(r.output) for r, _ in made) / 1024
    print(
        f"{args.checks} checks, {kib / args.checks * 1024:.0f} characters each on average · "
        f"Python {platform.python_version()} on {platform.machine()}"
    )
    ok = True
    settings = [*((kind, kind) for kind in PLANTS), ("all four", None), ("off", "none")]
    for label, value in settings:
        redactor = Redactor(RedactionSettings.parse(value))
        redactor.request(made[0][0])  # load plugins and phone metadata before timing
        started = time.perf_counter()
        results = [redactor.request(request) for request, _ in made]
        seconds = time.perf_counter() - started
        if value is None:
            ok &= all(
                plant is None or plant not in done.output
                for (_, plant), (done, _) in zip(made, results, strict=True)
            )
        per_check = seconds / args.checks
        load = per_check * args.concurrency / args.latency
        print(
            f"  {label:<12} {per_check * 1e6:8.0f} µs/check  {seconds / kib * 1e6:7.0f} µs/KiB"
            f"  {load:6.1%} of one core at {args.concurrency} calls of {args.latency:g} s in flight"
        )
    print("every planted value redacted" if ok else "A PLANTED VALUE WAS NOT REDACTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
