"""Headless Chromium for tests: the DOM a page renders to (after its scripts ran), the console
messages it logged, and screenshots (Debian's `chromium`; `make system-deps` installs it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PAGE_SECONDS = 120
HEADLESS_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--no-first-run",
)
"""How Chromium runs here (the docs' screenshot script too): no sandbox as root, no GPU, no
background traffic, small /dev/shm."""
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""Loopback needs no proxy, whatever the environment says."""
_CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)")


def require_chromium() -> str:
    """The Chromium binary, or skip the test with one line saying why."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no Chromium at {CHROMIUM} (run `make system-deps`)")
    return CHROMIUM


@dataclass
class Rendered:
    """What Chromium made of a page."""

    dom: str
    """`document.documentElement.outerHTML` after load and the page's scripts."""
    console: list[str]
    """Console messages and uncaught errors, one line each."""


def _run(page: Path | str, *flags: str, fragment: str = "") -> subprocess.CompletedProcess[str]:
    url = (page.as_uri() if isinstance(page, Path) else page) + (f"#{fragment}" if fragment else "")
    with tempfile.TemporaryDirectory(prefix="assay-chromium-") as profile:
        return subprocess.run(
            [require_chromium(), *HEADLESS_FLAGS, f"--user-data-dir={profile}", *flags, url],
            capture_output=True,
            text=True,
            timeout=PAGE_SECONDS,
            check=False,
        )


def render(page: Path | str, fragment: str = "") -> Rendered:
    """Load `page` from its file:// URL, or a URL (with `#fragment`), and return its DOM and
    console lines."""
    done = _run(page, "--enable-logging=stderr", "--v=0", "--dump-dom", fragment=fragment)
    assert done.returncode == 0, done.stderr[-500:]
    return Rendered(dom=done.stdout, console=_CONSOLE.findall(done.stderr))


def screenshot(page: Path, target: Path, width: int = 1400, height: int = 1600) -> None:
    """A PNG of the page's first `height` pixels at `width` px."""
    done = _run(page, f"--screenshot={target}", f"--window-size={width},{height}")
    assert done.returncode == 0 and target.exists(), done.stderr[-500:]


def print_pdf(page: Path, target: Path) -> None:
    """The page printed to PDF as Chromium prints it (the page's print styles apply)."""
    done = _run(page, f"--print-to-pdf={target}", "--no-pdf-header-footer")
    assert done.returncode == 0 and target.exists(), done.stderr[-500:]


class BrowserError(AssertionError):
    """A page did not do what a test waited for (the message says what, and where)."""


class DevToolsPage:
    """One page (tab) of a Chromium driven over the DevTools protocol."""

    def __init__(self, websocket_url: str) -> None:
        from websockets.sync.client import connect

        self.socket = connect(websocket_url, max_size=None)
        self._last_id = 0

    def call(self, method: str, **params: object) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are skipped)."""
        self._last_id += 1
        self.socket.send(json.dumps({"id": self._last_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=PAGE_SECONDS))
            if message.get("id") == self._last_id:
                if "error" in message:
                    raise BrowserError(f"chromium {method}: {message['error']}")
                return dict(message.get("result", {}))

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        done = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return done["result"].get("value")

    def click(self, element: str) -> None:
        """Click the element a JavaScript expression names with the mouse, as a person does (a
        script's `.click()` is no user gesture: a link to a new tab would be blocked)."""
        box = self.evaluate(
            f"(() => {{ const e = {element}; e.scrollIntoView({{block: 'center'}}); "
            "const r = e.getBoundingClientRect(); "
            "return [r.x + r.width / 2, r.y + r.height / 2] })()"
        )
        x, y = box
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def wait_for(self, expression: str, what: str, seconds: float = PAGE_SECONDS) -> Any:
        """Poll `expression` until it is truthy (a single-page app draws after it loads)."""
        deadline = time.monotonic() + seconds
        while not (value := self.evaluate(expression)):
            if time.monotonic() > deadline:
                url = self.evaluate("location.href")
                raise BrowserError(f"{url} did not show {what} within {seconds:.0f} s")
            time.sleep(0.3)
        return value

    def close(self) -> None:
        self.socket.close()


class DevTools:
    """Headless Chromium with its DevTools port open: pages a test loads, clicks through and
    reads as a person would (`scripts/ui_screenshots.py` takes the docs' screenshots so too)."""

    def __init__(
        self, profile: Path, window: tuple[int, int] = (1440, 1400), chromium: str | None = None
    ) -> None:
        self.process = subprocess.Popen(
            [
                chromium or require_chromium(),
                *HEADLESS_FLAGS,
                "--remote-debugging-port=0",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._pages: list[DevToolsPage] = []
        active = profile / "DevToolsActivePort"
        deadline = time.monotonic() + PAGE_SECONDS
        while not active.exists() or not active.read_text().strip():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise BrowserError(f"chromium did not start (exit {self.process.poll()})")
            time.sleep(0.2)
        self.port = int(active.read_text().split()[0])
        (first,) = [page for page in self.targets() if page.get("type") == "page"]
        self.page = self._attach(first)
        width, height = window
        self.page.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def targets(self) -> list[dict[str, Any]]:
        """Every page and worker Chromium has open (its `/json/list`)."""
        with _DIRECT.open(f"http://127.0.0.1:{self.port}/json/list", timeout=10) as got:
            listed: list[dict[str, Any]] = json.loads(got.read())
        return listed

    def opened(self, url_prefix: str, seconds: float = PAGE_SECONDS) -> DevToolsPage:
        """The page (a new tab, say) whose URL starts with `url_prefix`, once there is one."""
        deadline = time.monotonic() + seconds
        while True:
            found = [
                page
                for page in self.targets()
                if page.get("type") == "page" and str(page.get("url", "")).startswith(url_prefix)
            ]
            if found:
                return self._attach(found[0])
            if time.monotonic() > deadline:
                shown = ", ".join(str(page.get("url")) for page in self.targets())
                raise BrowserError(f"no page opened at {url_prefix} (open: {shown})")
            time.sleep(0.3)

    def _attach(self, target: dict[str, Any]) -> DevToolsPage:
        page = DevToolsPage(str(target["webSocketDebuggerUrl"]))
        self._pages.append(page)
        return page

    def close(self) -> None:
        for page in self._pages:
            page.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
