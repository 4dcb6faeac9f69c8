"""Screenshots of real Assay runs in the Prefect UI, for the docs (docs/img/).

Starts `prefect server start` on a free port with a fresh PREFECT_HOME (so the runs list shows
only these runs), runs `assay demo` (a passing v1 run and a regressed v2 run) and one failing
`assay gate` against it, then has headless Chromium (Debian's `chromium`; `make system-deps`)
capture:

- docs/img/prefect-runs.png: the runs list;
- docs/img/prefect-run.png: the regressed v2 run's page;
- docs/img/prefect-artifact.png: that run's summary artifact (verdict, pass rate, regression).

Usage: .venv/bin/python scripts/ui_screenshots.py [--out docs/img] [--chromium /usr/bin/chromium]
Exit 0 when every screenshot was written; 1 with one line on stderr otherwise.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the repo's test helpers are not installed

from tests.browser import BrowserError, DevTools  # noqa: E402 - after the path is set
from tests.servers import BIN, free_port, stop_process  # noqa: E402

SERVER_START_SECONDS = 120.0
WINDOW = (1440, 900)
RUNS_WINDOW = (1440, 1200)
"""Taller, so the runs list shows every run the script made."""
PAGE_SECONDS = 90.0
SETTLE_SECONDS = 2.0
"""After the awaited text appears: the UI fades content in and draws the run graph on a canvas."""


class ScreenshotError(Exception):
    """A step failed; the message is the one line the script prints."""


def api(base: str, path: str, body: dict[str, object] | None = None) -> object:
    """GET (or POST `body` to) the Prefect API and decode the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}{path}", data=data, headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@contextmanager
def prefect_server(env: dict[str, str], port: int, log: Path) -> Iterator[str]:
    """`prefect server start` in the foreground of a child process; yields the API URL."""
    base = f"http://127.0.0.1:{port}/api"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
        )
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            try:
                api(base, "/health")
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-400:].replace("\n", " ")
                    raise ScreenshotError(f"prefect server did not start: {tail}") from None
                time.sleep(0.5)
        yield base
    finally:
        stop_process(process, grace_seconds=20)


def run_examples(env: dict[str, str], workdir: Path) -> None:
    """`assay demo`, then a gate for v2 that fails (its pass rate is below the threshold)."""
    assay = str(BIN / "assay")
    demo = subprocess.run([assay, "demo"], cwd=workdir, env=env, capture_output=True, text=True)
    if demo.returncode != 0:
        raise ScreenshotError(f"assay demo exited {demo.returncode}: {demo.stderr.strip()[-300:]}")
    gate = subprocess.run(
        [
            assay,
            "gate",
            "support-bot",
            "--outputs",
            str(ROOT / "examples" / "outputs" / "support-bot-v2.jsonl"),
            "--subject",
            "agent:support-bot@v2",
        ],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    if gate.returncode != 1:
        raise ScreenshotError(f"assay gate exited {gate.returncode}, expected 1 (gate failed)")


def summary_artifact_id(base: str, run_id: str) -> str:
    """The id of the run's markdown summary artifact."""
    artifacts = api(
        base, "/artifacts/filter", {"artifacts": {"flow_run_id": {"any_": [run_id]}}, "limit": 50}
    )
    assert isinstance(artifacts, list)
    markdown = [a for a in artifacts if a.get("key") and a.get("type") == "markdown"]
    summaries = [str(a["id"]) for a in markdown if str(a["key"]).endswith("summary")]
    if not summaries:
        keys = ", ".join(str(a["key"]) for a in markdown)
        raise ScreenshotError(f"run {run_id} has no summary artifact (keys: {keys})")
    return summaries[0]


def regressed_run_id(base: str) -> str:
    """The id of the demo's v2 suite-run (the regressed one)."""
    runs = api(base, "/flow_runs/filter", {"sort": "START_TIME_ASC", "limit": 50})
    assert isinstance(runs, list)
    for run in runs:
        if run["name"].endswith("agent:support-bot@v2") and "subject:agent:support-bot@v2" in (
            run.get("tags") or []
        ):
            return str(run["id"])
    names = ", ".join(str(run["name"]) for run in runs)
    raise ScreenshotError(f"no suite-run for agent:support-bot@v2 among: {names}")


def shoot(chromium: DevTools, url: str, shows: str, target: Path, window: tuple[int, int]) -> None:
    """Load `url`, wait until its text contains `shows` (the UI is a single-page app that fetches
    after load, so a fixed delay can catch it half drawn), save a PNG of the viewport."""
    page = chromium.page
    width, height = window
    page.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=height,
        deviceScaleFactor=1,
        mobile=False,
    )
    page.call("Page.navigate", url=url)
    probe = f"document.body !== null && document.body.innerText.includes({json.dumps(shows)})"
    page.wait_for(probe, repr(shows), PAGE_SECONDS)
    time.sleep(SETTLE_SECONDS)
    shot = page.call("Page.captureScreenshot", format="png")
    target.write_bytes(base64.b64decode(shot["data"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args(argv)
    if not Path(args.chromium).exists():
        print(f"error: no Chromium at {args.chromium} (run `make system-deps`)", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="assay-ui-") as scratch:
        work = Path(scratch)
        base = f"http://127.0.0.1:{port}/api"
        env = {
            **os.environ,
            "PREFECT_HOME": str(work / "prefect-home"),
            "PREFECT_API_URL": base,
            "PREFECT_UI_API_URL": base,
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "ASSAY_STORE": f"file://{work / 'store'}",
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        }
        try:
            with prefect_server(env, port, work / "server.log"):
                run_examples(env, work)
                run_id = regressed_run_id(base)
                ui = f"http://127.0.0.1:{port}"
                artifact_id = summary_artifact_id(base, run_id)
                shots = {
                    "prefect-runs.png": (f"{ui}/runs", "agent:support-bot@v1", RUNS_WINDOW),
                    "prefect-run.png": (f"{ui}/runs/flow-run/{run_id}", "Task Runs", WINDOW),
                    "prefect-artifact.png": (
                        f"{ui}/artifacts/artifact/{artifact_id}",
                        "Compared with baseline",
                        WINDOW,
                    ),
                }
                with DevTools(work / "chromium", chromium=args.chromium) as browser:
                    for name, (url, shows, window) in shots.items():
                        shoot(browser, url, shows, args.out / name, window)
                        print(f"{args.out / name}  ←  {url}")
        except (ScreenshotError, BrowserError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
