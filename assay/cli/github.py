"""`assay github comment`: post the gate's pull-request comment, or update it in place.

Exit codes: 0 posted or updated; 2 usage errors and every refusal, in one line: 401, 403, 404,
a 2xx answer of the wrong shape, a listing that goes on past its page bound or links a page on
another origin, a 429 or 5xx still there after the retries, an unreachable API, a file without
the gate marker. The gate's own exit code never depends on the comment (docs/ci.md).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from assay.cli import _common as common

github_app = typer.Typer(help="GitHub: the gate's pull-request comment.", no_args_is_help=True)
common.app.add_typer(github_app, name="github")


@github_app.command("comment")
def github_comment(
    file: Annotated[
        Path, typer.Option("--file", help="The comment `assay gate --comment FILE` wrote.")
    ],
    pr: Annotated[int, typer.Option("--pr", help="The pull request's number.", min=1)],
    repo: Annotated[
        str | None,
        typer.Option("--repo", help="OWNER/NAME (default: $GITHUB_REPOSITORY, as in Actions)."),
    ] = None,
) -> None:
    """Post the comment on the pull request, or update the comment that carries the same
    marker (one per suite and subject). Uses GITHUB_TOKEN and GITHUB_API_URL (default
    https://api.github.com)."""
    from assay.gate.github import DEFAULT_API_URL, post_comment

    repository = repo or os.environ.get("GITHUB_REPOSITORY", "")
    if not repository:
        common.fail("--repo OWNER/NAME is needed (or GITHUB_REPOSITORY)")
    try:
        body = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        common.fail(f"{file}: cannot read the comment ({type(exc).__name__})")
    posted = common.guarded(
        lambda: post_comment(
            body,
            repository=repository,
            pull_request=pr,
            token=os.environ.get("GITHUB_TOKEN", "").strip(),
            api_url=os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL,
        )
    )
    common.out.print(f"{posted.action} comment {posted.id}: {posted.url}", highlight=False)
