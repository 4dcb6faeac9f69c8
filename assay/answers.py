"""What `assay serve` answers, read by its client: Assay's JSON or not, its problems as
`AssayAPIError`, its event streams as events.

An answer that is not Assay's (a proxy's login page, another server on the port) is an
`AssayAPIError` with `status` None that names what answered — never more of its body than a
page title.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, TypeVar

import httpx

from assay.errors import shown

if TYPE_CHECKING:
    from pydantic import BaseModel

JSON_TYPES: Final = ("application/json", "application/problem+json")
TITLE: Final = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)
Model = TypeVar("Model", bound="BaseModel")


class AssayAPIError(Exception):
    """An error answer of the service (`status`, and the problem+json body as `problem`); or,
    with `status` None, a service that could not be reached, that did not answer in time, or an
    answer that was not Assay's (`problem` then has a `title` and a one-line `detail`)."""

    def __init__(self, status: int | None, problem: Mapping[str, Any]) -> None:
        self.status = status
        self.problem = dict(problem)
        super().__init__(self.detail)

    @property
    def detail(self) -> str:
        """The problem's one-line `detail` (else its title)."""
        return str(self.problem.get("detail") or self.problem.get("title") or "error")


def not_assay(what: str) -> AssayAPIError:
    return AssayAPIError(
        None, {"title": "not an Assay answer", "detail": f"not an Assay answer: {what}"}
    )


def validated(model: type[Model], body: Any, source: str) -> Model:
    """`body` as `model`; else AssayAPIError naming `source` (what answered it: `METHOD URL
    answered …`), the model and the first field that did not fit — never a value from the
    body."""
    from pydantic import ValidationError

    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors(include_input=False, include_url=False)[0]
        field = ".".join(str(part) for part in first["loc"])
        at = f"{shown(field, 60)}: " if field else ""
        raise not_assay(
            f"{source}, not the {model.__name__} expected ({at}{first['type']})"
        ) from None


@dataclass(frozen=True)
class Answer:
    """Assay's JSON answer to one request, and `source`, what answered it (`METHOD URL answered
    HTTP STATUS TYPE`) for an error that says so."""

    status: int
    body: Any
    source: str

    def expect(self, valid: Callable[[Any], bool], expected: str) -> Any:
        """The body, if `valid`; else AssayAPIError (an answer of another shape)."""
        if not valid(self.body):
            raise not_assay(f"{self.source}, not {expected}")
        return self.body

    def model(self, model: type[Model]) -> Model:
        return validated(model, self.body, self.source)


def media_type(response: httpx.Response) -> str:
    content_type: str = response.headers.get("content-type", "")
    return content_type.partition(";")[0].strip().lower()


def answer_source(response: httpx.Response) -> str:
    """`METHOD URL answered HTTP STATUS TYPE` (the URL without its query)."""
    url = response.request.url
    where = f"{url.scheme}://{url.netloc.decode('ascii')}{url.path}"
    kind = media_type(response) or "without a content type"
    return f"{response.request.method} {where} answered HTTP {response.status_code} {kind}"


def _hint(content: bytes) -> str:
    """What a page that is not Assay's answer calls itself (its `<title>`, clamped and escaped,
    as a login or error page names the proxy or server): never more of the body."""
    found = TITLE.search(content[:4096])
    title = " ".join(found.group(1).decode("utf-8", "replace").split()) if found else ""
    return f" (page title {shown(title, 40)})" if title else ""


def answer_of(response: httpx.Response, content: bytes) -> Answer:
    """The JSON `content` of `response`; AssayAPIError when it is not JSON (by its content type
    or its text): what answered was not Assay."""
    source = answer_source(response)
    if media_type(response) not in JSON_TYPES:
        raise not_assay(source + _hint(content))
    try:
        body = json.loads(content)
    except ValueError:
        raise not_assay(f"{source} that does not parse as JSON") from None
    return Answer(response.status_code, body, source)


def is_object(body: Any) -> bool:
    return isinstance(body, dict)


def is_list(body: Any) -> bool:
    return isinstance(body, list)


def is_page(body: Any) -> bool:
    return (
        isinstance(body, dict)
        and isinstance(body.get("items"), list)
        and all(isinstance(item, dict) for item in body["items"])
        and "next_cursor" in body
        and isinstance(body["next_cursor"], str | None)
    )


def is_published(body: Any) -> bool:
    return isinstance(body, dict) and {"suite", "version"} <= body.keys()


def is_alive(body: Any) -> bool:
    return isinstance(body, dict) and body.get("status") == "alive"


def sse_events(lines: Iterator[str], source: str) -> Iterator[dict[str, Any]]:
    """Server-Sent Events from a stream's lines (the subset the service sends: `event`, `id`,
    one `data` line); AssayAPIError for data that is not JSON (`source`: what answered)."""
    event: dict[str, Any] = {"event": "message", "id": None, "data": None}
    for line in lines:
        if not line:
            if event["data"] is not None:
                yield event
            event = {"event": "message", "id": None, "data": None}
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            event["event"] = value
        elif name == "id":
            event["id"] = value
        elif name == "data":
            try:
                event["data"] = json.loads(value)
            except ValueError:
                raise not_assay(f"{source}, with event data that does not parse as JSON") from None
