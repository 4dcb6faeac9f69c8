"""The report link of the Prefect UI, clicked (issue 39, item 5): in headless Chromium, a run the
service ran → its flow run page in the Prefect UI → the Artifacts tab → the report link artifact
→ its link, which opens the report served by `assay serve` in a new tab. A browser sends no
token: the link's key opens that one report, and nothing else.

A real `prefect server start` (the UI; the test harness's API serves none) and a real `assay
serve` on it. Skipped, saying why, without Chromium.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

from tests.api_service import example_outputs, example_suite, start_service
from tests.browser import DevTools, require_chromium
from tests.servers import BIN, ServerProcess, free_port

PREFECT_START_SECONDS = 240.0


def _prefect_with_ui(root: Path) -> ServerProcess:
    port = free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")},
        "PREFECT_HOME": str(root / "prefect-home"),
        "PREFECT_API_URL": api,
        "PREFECT_UI_API_URL": api,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    }
    command = [str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    return ServerProcess(
        command, port, root / "prefect.log", env=env, timeout=PREFECT_START_SECONDS
    )


def test_the_report_link_artifact_clicked_in_the_prefect_ui_opens_the_report(
    tmp_path: Path,
) -> None:
    require_chromium()  # before any server starts
    prefect = _prefect_with_ui(tmp_path)
    prefect.start()
    try:
        service = start_service(tmp_path / "serve", prefect_api_url=f"{prefect.endpoint_url}/api")
        try:
            with service.client("operator") as client:
                assert client.post("/suites", json=example_suite()).status_code == 201
                ran = client.post(
                    "/runs",
                    json={
                        "suite": "support-bot",
                        "subject": "agent:support-bot@v1",
                        "outputs": example_outputs("v1"),
                    },
                    timeout=300,
                )
                assert ran.status_code == 201, ran.text
            run_id = ran.json()["run_id"]
            report = f"{service.url}/runs/{run_id}/report"
            _click_through(prefect.endpoint_url, run_id, report, tmp_path / "chromium")

            assert httpx.get(report).status_code == 401  # the link's key, not the address, opens it
            other = httpx.get(report, params={"key": "0" * 32})
            assert other.status_code == 401
        finally:
            service.stop()
    finally:
        prefect.stop()


def _click_through(ui: str, run_id: str, report: str, profile: Path) -> None:
    with DevTools(profile) as chromium:
        page = chromium.page
        page.call("Page.navigate", url=f"{ui}/runs/flow-run/{run_id}")
        page.wait_for("document.getElementById('artifacts') !== null", "the Artifacts tab")
        page.click("document.getElementById('artifacts')")
        # The tab lists artifacts in a virtual scroller: it draws the cards it shows.
        page.wait_for(
            "(document.querySelector('.flow-run-artifacts')?.scrollIntoView(), true)"
            " && [...document.querySelectorAll('a')]"
            ".some(a => a.innerText.includes('assay-report-'))",
            "the report link artifact",
        )
        page.click(
            "[...document.querySelectorAll('a')].find(a => a.innerText.includes('assay-report-'))"
        )
        link = json.dumps(f"/runs/{run_id}/report")
        href = page.wait_for(
            f"[...document.querySelectorAll('a')].find(a => a.href.includes({link}))?.href",
            "the report link",
        )
        assert str(href).startswith(report)
        page.click(f"[...document.querySelectorAll('a')].find(a => a.href.includes({link}))")

        opened = chromium.opened(report, seconds=30)
        opened.wait_for("document.readyState === 'complete'", "a loaded page")
        assert opened.evaluate("document.contentType") == "text/html"
        shown = opened.wait_for("document.body?.innerText", "the report")
        assert "support-bot@1" in shown and "agent:support-bot@v1" in shown, shown[:300]
        assert "Compared with a baseline" in shown
