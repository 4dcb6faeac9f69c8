"""The docs site opened from `site/index.html` (as the README says): nav links name their .html
file (no directory listing), search finds pages from file:// with no server, and no page loads
a script, style or font from the network (issue 39)."""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.browser import HEADLESS_FLAGS, PAGE_SECONDS, require_chromium

ROOT = Path(__file__).resolve().parent.parent
MKDOCS = Path(sys.executable).with_name("mkdocs")
LOADED_FROM_NETWORK = re.compile(r"""<(?:script|link)\b[^>]*(?:src|href)="https?://""")


def test_the_docs_site_works_from_file_urls_with_search(tmp_path: Path) -> None:
    chromium = require_chromium()
    site = tmp_path / "site"
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    index = (site / "index.html").read_text(encoding="utf-8")
    links = re.findall(r'<a href="([^"#]+)" class="md-nav__link', index)
    assert "runs.html" in links and not [link for link in links if link.endswith("/")]
    assert LOADED_FROM_NETWORK.search(index) is None
    with tempfile.TemporaryDirectory(prefix="assay-chromium-") as profile:
        shown = subprocess.run(
            [
                chromium,
                *HEADLESS_FLAGS,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=8000",  # the search worker indexes after load
                "--dump-dom",
                f"{(site / 'runs.html').as_uri()}?q=baseline",
            ],
            capture_output=True,
            text=True,
            timeout=PAGE_SECONDS,
            check=False,
        )
    found = re.search(r'md-search-result__meta">(\d+) matching documents?<', shown.stdout)
    assert found is not None and int(found.group(1)) > 0, shown.stderr[-1000:]
