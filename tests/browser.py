"""Headless Chromium for tests: the DOM a page renders to (after its scripts ran), the console
messages it logged, and screenshots (Debian's `chromium`; `make system-deps` installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

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
