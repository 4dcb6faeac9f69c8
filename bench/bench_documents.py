"""Document-parsing benchmark: what the hostile-input checks cost on big suites.

`assay.documents.parse_document` refuses duplicate keys (a Python hook per JSON object / YAML
mapping) and scans YAML parser events for alias expansion when a document holds an anchor. This
compares it with the plain parsers it wraps (`json.loads`, `yaml.load` with the C safe loader) on
a generated N-case suite, in JSON, in YAML, and in YAML that shares one scorer list by alias, and
times how long a 9x9 alias bomb takes to be refused. Prints seconds (best of `--repeat`) and
ratios; there are no goals, this is a measurement.

    python bench/bench_documents.py [--cases 100000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assay.documents import parse_document
from assay.errors import InputError

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _cases(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"case-{n:06d}",
            "input": f"Question {n} about refunds?",
            "tags": ["refunds"],
            "scorers": [{"contains": "refund"}, {"regex": r"\b30 days\b"}],
        }
        for n in range(count)
    ]


def _shared_yaml(count: int) -> str:
    first = "  - id: case-000000\n    input: q\n    scorers: &checks\n"
    first += "      - contains: refund\n      - regex: '30 days'\n"
    rest = "".join(
        f"  - id: case-{n:06d}\n    input: q\n    scorers: *checks\n" for n in range(1, count)
    )
    return f"suite: shared\ncases:\n{first}{rest}"


def _bomb() -> str:
    levels = ["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
    for previous, name in zip(string.ascii_lowercase[:8], string.ascii_lowercase[1:9], strict=True):
        levels.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    value = "\n".join(f"            {level}" for level in levels)
    return (
        "suite: bomb\ncases:\n  - id: c1\n    input: q\n    scorers:\n"
        f"      - json_equal:\n          value:\n{value}\n"
    )


def _best(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return min(times)


def _refused(text: str) -> None:
    try:
        parse_document(text, "bomb.yaml")
    except InputError:
        return
    raise AssertionError("the alias bomb was not refused")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    document = {"suite": "bench", "cases": _cases(args.cases)}
    json_text = json.dumps(document)
    yaml_text = yaml.safe_dump(document, sort_keys=False)
    shared = _shared_yaml(args.cases)
    rows = [
        ("JSON", json_text, ".json", lambda: json.loads(json_text)),
        ("YAML", yaml_text, ".yaml", lambda: yaml.load(yaml_text, Loader=_LOADER)),
        ("YAML, shared by alias", shared, ".yaml", lambda: yaml.load(shared, Loader=_LOADER)),
    ]
    print(f"{args.cases:,} cases, best of {args.repeat}")
    print(f"{'document':<24}{'size MiB':>10}{'plain s':>10}{'checked s':>11}{'ratio':>8}")
    for label, text, suffix, plain in rows:
        plain_s = _best(plain, args.repeat)
        checked_s = _best(lambda t=text, s=suffix: parse_document(t, f"suite{s}"), args.repeat)
        size = len(text.encode()) / 2**20
        print(
            f"{label:<24}{size:>10.1f}{plain_s:>10.2f}{checked_s:>11.2f}{checked_s / plain_s:>8.2f}"
        )
    bomb = _bomb()
    refused_s = _best(lambda: _refused(bomb), args.repeat)
    print(
        f"alias bomb ({len(bomb.encode())} bytes, 9**9 nodes once expanded): "
        f"refused in {refused_s:.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
