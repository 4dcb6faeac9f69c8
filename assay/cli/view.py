"""`assay view`: a run's cases beside what the agent said — the user's own outputs joined to the
run's evidence at view time, verified by their keyed hashes, served from memory on 127.0.0.1 (or
written to the file the user names). Nothing of the outputs is stored or logged.

Served by the standard library's `http.server`, not the FastAPI service: one page from memory
needs no `serve` extra, no tokens of the service's tiers and no Prefect, and starts at once.
"""

from __future__ import annotations

import secrets
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

import typer

from assay.cli import _common as common

LOOPBACK = "127.0.0.1"


@common.app.command("view")
def view_command(
    run_id: Annotated[str, typer.Argument(help="The run (id or unique prefix) to view.")],
    outputs: Annotated[
        str,
        typer.Option(
            "--outputs",
            help="The outputs the run scored (file, folder or s3:// prefix), read as the run "
            "read them; each is shown only if its keyed hash matches the run's evidence.",
        ),
    ],
    baseline_outputs: Annotated[
        str | None,
        typer.Option(
            "--baseline-outputs",
            help="The outputs of the run's regression baseline, shown side by side (verified "
            "the same way).",
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option("--port", min=1, max=65535, help="Serve on this port (default: any free)."),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="Write the page to FILE instead of serving it."),
    ] = None,
    store: common.StoreOption = None,
) -> None:
    """Show each case's output, turns and tool calls beside its verdicts, verified against the
    run's evidence; served from memory on 127.0.0.1 until Ctrl-C, or written to -o FILE."""
    if port is not None and output is not None:
        common.fail("give --port (serve the page) or -o FILE (write it), not both")
    evidence = common.open_evidence(store)
    from assay.reports.view import Standing, join_outputs, view_page
    from assay.runs.records import resolve_run_id

    run_id = common.guarded(lambda: resolve_run_id(evidence, run_id))
    joined = common.guarded(lambda: join_outputs(evidence, run_id, outputs, baseline_outputs))
    counts = joined.counts()
    common.out.print(
        ", ".join(f"{counts[standing]} {standing.value}" for standing in Standing),
        highlight=False,
        soft_wrap=True,
    )
    html = view_page(joined)
    if output is not None:
        output.write_text(html, encoding="utf-8")
        common.out.print(f"wrote {output} ({len(html.encode()):,} bytes)", highlight=False)
        return
    serve(html.encode(), port or 0)


def serve(body: bytes, port: int) -> None:
    """Serve `body` at a secret path on the loopback address until Ctrl-C: another local user
    who finds the port cannot guess the path, and nothing is logged (a request line names it)."""
    from assay.reports.page import CONTENT_SECURITY_POLICY

    token = secrets.token_urlsafe(24)

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked = urlsplit(self.path).path.strip("/")
            if not secrets.compare_digest(asked.encode(), token.encode()):
                self.send_error(HTTPStatus.NOT_FOUND)
                return
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Content-Security-Policy", CONTENT_SECURITY_POLICY)
            self.send_header("Cache-Control", "no-store")
            self.send_header("Referrer-Policy", "no-referrer")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Requests are not logged: their lines hold the secret path."""

    server = ThreadingHTTPServer((LOOPBACK, port), Page)
    url = f"http://{LOOPBACK}:{server.server_address[1]}/{token}/"
    common.out.print(
        f"serving the page at {url} (Ctrl-C stops it)", highlight=False, soft_wrap=True
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        common.out.print("stopped: the page is gone, nothing was kept", highlight=False)
    finally:
        server.server_close()
