"""A pull-request comment on GitHub, posted once and then updated in place (REST v3, httpx).

`post_comment` lists the pull request's comments (page by page, at most `MAX_PAGES`), and PATCHes
the first one that carries the body's hidden marker (`assay.gate.comment.gate_marker`), or POSTs
a new one when none does: each gate of a suite and subject keeps one comment per pull request,
however many times CI runs. The API address, token and repository come from the same variables
GitHub Actions sets (`GITHUB_API_URL`, `GITHUB_TOKEN`, `GITHUB_REPOSITORY`).

The token never leaves `GITHUB_API_URL`'s origin: a `next` link to another scheme, host or port is
not followed, and redirects are not followed at all. A 429 or 5xx answer is retried, waiting what
its `Retry-After` asks (never more than `MAX_RETRY_AFTER_SECONDS`), at most `MAX_RETRIES` times;
each retry finds the marked comment again from the first page, so a write GitHub failed after
making is updated, not made twice. Every refusal — a 4xx, a 2xx of the wrong shape, a listing
past its bound, an off-origin link, retries spent — is one `GitHubError` line naming the status,
the request and what to do; the comment's body never appears in a message.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Final, Literal, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from assay.errors import AssayError, shown
from assay.gate.comment import comment_marker
from assay.judge.endpoint import retry_after_seconds

DEFAULT_API_URL: Final = "https://api.github.com"
PER_PAGE: Final = 100
"""Comments per listing page (GitHub's maximum)."""
MAX_PAGES: Final = 50
"""The most listing pages read (5,000 comments): a listing that goes on is refused, not posted
to, since the marked comment may be on a page not read."""
RETRY_WAITS_SECONDS: Final = (1.0, 2.0, 4.0)
"""The wait before each retry of a 429 or 5xx answer that names no `Retry-After`; as many
retries as waits."""
MAX_RETRIES: Final = len(RETRY_WAITS_SECONDS)
MAX_RETRY_AFTER_SECONDS: Final = 60.0
"""The longest `Retry-After` waited; an answer asking for more is refused at once (retrying
sooner than GitHub asks is what gets an integration blocked)."""
TIMEOUT_SECONDS: Final = 30.0
REPOSITORY: Final = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")

_WHY: Final = {
    401: "the token is missing, expired or wrong (GITHUB_TOKEN)",
    403: "the token may not comment on this repository's pull requests (in Actions grant "
    "`permissions: pull-requests: write`), or a rate limit was hit",
    404: "no such repository or pull request, or the token cannot see it",
}

T = TypeVar("T")


class GitHubError(AssayError):
    """GitHub refused or could not be reached; the message says which request and why."""


class _RetryableAnswer(GitHubError):
    """A 429 or 5xx answer: the same request may succeed later (after `retry_after` seconds, when
    GitHub said)."""

    def __init__(self, message: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class PostedComment(BaseModel):
    """What `post_comment` did: created a comment or updated the one carrying the marker."""

    action: Literal["created", "updated"]
    id: int
    url: str


class _ListedComment(BaseModel):
    """The fields of a listed comment that finding the marked one reads."""

    model_config = ConfigDict(strict=True)
    id: int
    body: str | None = None


class _WrittenComment(BaseModel):
    """The fields of a created or updated comment that the answer reports."""

    model_config = ConfigDict(strict=True)
    id: int
    html_url: str | None = None
    url: str | None = None


_LISTING: Final = TypeAdapter(list[_ListedComment])
_WRITTEN: Final = TypeAdapter(_WrittenComment)


def _refusal(response: httpx.Response) -> str:
    request = response.request
    why = _WHY.get(response.status_code)
    try:
        said = response.json().get("message")
    except (ValueError, AttributeError):
        said = None
    detail = f" ({shown(said)})" if isinstance(said, str) and said else ""
    return (
        f"GitHub answered {response.status_code} to {request.method} {request.url.path}{detail}"
        + (f": {why}" if why else "")
    )


def _checked(response: httpx.Response, shape: TypeAdapter[T], what: str) -> T:
    """The answer's body as `shape`, or the one-line refusal of a non-2xx answer (retryable for
    a 429 or 5xx) or of a 2xx body that is not `what` it should be."""
    status = response.status_code
    if status == 429 or status >= 500:
        raise _RetryableAnswer(_refusal(response), retry_after_seconds(response.headers))
    if not response.is_success:
        raise GitHubError(_refusal(response))
    try:
        return shape.validate_json(response.content)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        where = "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in first["loc"]
        )
        request = response.request
        raise GitHubError(
            f"GitHub answered {status} to {request.method} {request.url.path}, but not with "
            f"{what} ({where.removeprefix('.') or 'body'}: {first['msg']}): is GITHUB_API_URL "
            "GitHub's REST API?"
        ) from None


def _origin(url: httpx.URL) -> str:
    """scheme://host:port — what a URL shares with another on the same origin (httpx leaves the
    scheme's default port out)."""
    return f"{url.scheme}://{url.host}" + (f":{url.port}" if url.port is not None else "")


def _next_page(response: httpx.Response) -> httpx.URL | None:
    """The listing's `next` link, refused unless it stays on the origin that was asked."""
    link = response.links.get("next", {}).get("url")
    if link is None:
        return None
    request = response.request
    try:
        following = request.url.join(link)
    except httpx.InvalidURL:
        raise GitHubError(
            f"GitHub's listing GET {request.url.path} links its next page to {shown(link)}, "
            "which is not a URL"
        ) from None
    if _origin(following) != _origin(request.url):
        raise GitHubError(
            f"GitHub's listing GET {request.url.path} links its next page to "
            f"{shown(_origin(following))}, not GITHUB_API_URL's origin {_origin(request.url)}: "
            "not followed, so the token is not sent there"
        )
    return following


def _marked_comment(client: httpx.Client, comments_path: str, marker: str) -> int | None:
    """The id of the first comment carrying `marker`, across at most `MAX_PAGES` pages."""
    page: httpx.URL | str = f"{comments_path}?per_page={PER_PAGE}"
    for _ in range(MAX_PAGES):
        response = client.get(page)
        for comment in _checked(response, _LISTING, "a list of comments"):
            if comment_marker(comment.body or "") == marker:
                return comment.id
        following = _next_page(response)
        if following is None:
            return None
        page = following
    raise GitHubError(
        f"GitHub's listing GET {comments_path} goes on past {MAX_PAGES} pages "
        f"({MAX_PAGES * PER_PAGE:,} comments, the most read) without the marker: nothing "
        "posted, since the gate's comment may be on a page not read"
    )


def _with_retries(attempt: Callable[[], T]) -> T:
    """`attempt()`, again after each 429 or 5xx answer, at most `MAX_RETRIES` more times."""
    for wait_without_retry_after in RETRY_WAITS_SECONDS:
        try:
            return attempt()
        except _RetryableAnswer as answer:
            wait = answer.retry_after
            if wait is not None and wait > MAX_RETRY_AFTER_SECONDS:
                raise GitHubError(
                    f"{answer}; it asked to wait {wait:,.0f} s, longer than the "
                    f"{MAX_RETRY_AFTER_SECONDS:.0f} s this waits: try again later"
                ) from None
            time.sleep(wait_without_retry_after if wait is None else wait)
    try:
        return attempt()
    except _RetryableAnswer as answer:
        raise GitHubError(f"{answer}; still so after {MAX_RETRIES} retries") from None


def post_comment(
    body: str, *, repository: str, pull_request: int, token: str, api_url: str = DEFAULT_API_URL
) -> PostedComment:
    """Post `body` on the pull request, or update the comment that carries its marker.

    Raises:
        GitHubError: the body has no marker, the repository is not OWNER/NAME, or GitHub
            refused a request, answered one with the wrong shape, listed past `MAX_PAGES`,
            linked a page on another origin, stayed unavailable through the retries, or could
            not be reached.
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

    def find_and_write(client: httpx.Client) -> PostedComment:
        existing = _marked_comment(client, f"{issue}/comments", marker)
        if existing is None:
            answer = client.post(f"{issue}/comments", json={"body": body})
        else:
            answer = client.patch(
                f"/repos/{repository}/issues/comments/{existing}", json={"body": body}
            )
        written = _checked(answer, _WRITTEN, "a comment")
        return PostedComment(
            action="created" if existing is None else "updated",
            id=written.id,
            url=written.html_url or written.url or "",
        )

    try:
        with httpx.Client(
            base_url=api_url.rstrip("/"),
            headers=headers,
            timeout=TIMEOUT_SECONDS,
            follow_redirects=False,
        ) as client:
            return _with_retries(lambda: find_and_write(client))
    except httpx.TransportError as exc:
        raise GitHubError(
            f"cannot reach the GitHub API at {api_url} ({type(exc).__name__}): check GITHUB_API_URL"
        ) from None
