"""A pull-request comment on GitHub, posted once and then updated in place (REST v3, httpx).

`post_comment` lists the pull request's comments (every page), and PATCHes the first one that
carries the body's hidden marker (`assay.gate.comment.gate_marker`), or POSTs a new one when none
does: each gate of a suite and subject keeps one comment per pull request, however many times CI
runs. The API address, token and repository come from the same variables GitHub Actions sets
(`GITHUB_API_URL`, `GITHUB_TOKEN`, `GITHUB_REPOSITORY`). A refusal is one line naming the status,
the request and what to fix; the comment's body never appears in a message.
"""

from __future__ import annotations

import re
from typing import Final, Literal

import httpx
from pydantic import BaseModel

from assay.errors import AssayError, shown
from assay.gate.comment import comment_marker

DEFAULT_API_URL: Final = "https://api.github.com"
PER_PAGE: Final = 100
"""Comments per listing page (GitHub's maximum)."""
TIMEOUT_SECONDS: Final = 30.0
REPOSITORY: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")

_WHY: Final = {
    401: "the token is missing, expired or wrong (GITHUB_TOKEN)",
    403: "the token may not comment on this repository's pull requests (in Actions grant "
    "`permissions: pull-requests: write`), or a rate limit was hit",
    404: "no such repository or pull request, or the token cannot see it",
}


class GitHubError(AssayError):
    """GitHub refused or could not be reached; the message says which request and why."""


class PostedComment(BaseModel):
    """What `post_comment` did: created a comment or updated the one carrying the marker."""

    action: Literal["created", "updated"]
    id: int
    url: str


def _checked(response: httpx.Response) -> httpx.Response:
    if response.is_success:
        return response
    request = response.request
    why = _WHY.get(response.status_code)
    try:
        said = response.json().get("message")
    except (ValueError, AttributeError):
        said = None
    detail = f" ({shown(said)})" if isinstance(said, str) and said else ""
    raise GitHubError(
        f"GitHub answered {response.status_code} to {request.method} {request.url.path}{detail}"
        + (f": {why}" if why else "")
    )


def _marked_comment(client: httpx.Client, comments_path: str, marker: str) -> int | None:
    """The id of the first comment carrying `marker`, across every page of the listing."""
    url: str | None = f"{comments_path}?per_page={PER_PAGE}"
    while url is not None:
        response = _checked(client.get(url))
        for comment in response.json():
            if comment_marker(comment.get("body") or "") == marker:
                return int(comment["id"])
        url = response.links.get("next", {}).get("url")
    return None


def post_comment(
    body: str, *, repository: str, pull_request: int, token: str, api_url: str = DEFAULT_API_URL
) -> PostedComment:
    """Post `body` on the pull request, or update the comment that carries its marker.

    Raises:
        GitHubError: the body has no marker, the repository is not OWNER/NAME, or GitHub
            refused a request or could not be reached.
    """
    marker = comment_marker(body)
    if marker is None:
        raise GitHubError(
            "the comment has no `<!-- assay-gate:… -->` marker: write it with "
            "`assay gate … --comment FILE`"
        )
    if not REPOSITORY.fullmatch(repository):
        raise GitHubError(f"repository {shown(repository)} is not OWNER/NAME")
    if not token:
        raise GitHubError("no GitHub token: set GITHUB_TOKEN")
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": "2022-11-28",
        "User-Agent": "assay",
    }
    issue = f"/repos/{repository}/issues/{pull_request}"
    try:
        with httpx.Client(
            base_url=api_url.rstrip("/"), headers=headers, timeout=TIMEOUT_SECONDS
        ) as client:
            existing = _marked_comment(client, f"{issue}/comments", marker)
            if existing is None:
                answer = _checked(client.post(f"{issue}/comments", json={"body": body}))
            else:
                path = f"/repos/{repository}/issues/comments/{existing}"
                answer = _checked(client.patch(path, json={"body": body}))
    except httpx.TransportError as exc:
        raise GitHubError(
            f"cannot reach the GitHub API at {api_url} ({type(exc).__name__}): check GITHUB_API_URL"
        ) from None
    posted = answer.json()
    return PostedComment(
        action="created" if existing is None else "updated",
        id=int(posted["id"]),
        url=str(posted.get("html_url") or posted.get("url") or ""),
    )
