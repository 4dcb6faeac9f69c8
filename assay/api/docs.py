"""The service's contract: the OpenAPI document (`contract`), and `/docs` (Swagger UI) and
`/redoc` served from the assets an installed package ships (`fastapi-offline`), never from a
CDN — the pages work on a machine with no internet, and load nothing from a third party.
"""

from __future__ import annotations

from importlib.resources import files
from typing import Any, Final

from fastapi import FastAPI
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.openapi.utils import get_openapi
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from assay.suites.suite import Suite

ASSETS: Final = "/docs-assets"
"""Where the Swagger UI and ReDoc files are served from."""
_PACKAGE: Final = "fastapi_offline"


def install(app: FastAPI) -> None:
    """Serve the contract (`contract`) at `/openapi.json`, and `/docs`, its OAuth2 redirect
    page and `/redoc` from the packaged assets."""
    app.openapi = lambda: contract(app)  # type: ignore[method-assign]
    app.mount(ASSETS, StaticFiles(directory=str(files(_PACKAGE) / "static")), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    title = app.title

    @app.get("/docs", include_in_schema=False)
    async def swagger() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{title} — API",
            oauth2_redirect_url="/docs/oauth2-redirect",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon.png",
            # Swagger UI would send the document to an online validator for its badge.
            swagger_ui_parameters={"validatorUrl": None, "persistAuthorization": True},
        )

    @app.get("/docs/oauth2-redirect", include_in_schema=False)
    async def swagger_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get("/redoc", include_in_schema=False)
    async def redoc() -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url,
            title=f"{title} — API",
            redoc_js_url=f"{ASSETS}/redoc.standalone.js",
            redoc_favicon_url=f"{ASSETS}/favicon.png",
            with_google_fonts=False,
        )


SUITE_EXAMPLE: Final = {
    "suite": "support-bot",
    "pass_threshold": 0.8,
    "defaults": [{"not_contains": {"value": "as an AI", "case_sensitive": False}}],
    "cases": [
        {
            "id": "window-40-days",
            "input": "Can I return shoes after 40 days?",
            "expected": "No. Returns are accepted within 30 days.",
            "scorers": [{"regex": "\\b30 days\\b"}],
        }
    ],
}
RUN_EXAMPLE: Final = {
    "suite": "support-bot@1",
    "subject": "agent:support-bot@v2",
    "outputs": [{"case_id": "window-40-days", "output": "...", "duration_ms": 1164}],
    "baseline": "RUN_ID",
}
ACCEPTED_EXAMPLE: Final = {
    "run_id": "0b6f6c1e-5b9e-4d53-9a5e-2f1d3c0a7e21",
    "status": "running",
    "chunks_done": 0,
    "chunks": 15,
    "cases": 30000,
    "error": None,
}
CASES_EXAMPLE: Final = {
    "items": [
        {
            "case_id": "window-40-days",
            "status": "fail",
            "score": 0.5,
            "label": "regex /\\b30 days\\b/: no match",
            "checks": [
                {
                    "scorer": "regex",
                    "kind": "regex",
                    "status": "fail",
                    "score": 0.0,
                    "label": "regex /\\b30 days\\b/: no match",
                }
            ],
        }
    ],
    "next_cursor": None,
}
_PROBLEM_REF: Final = {"$ref": "#/components/schemas/ProblemDetails"}
_IDEMPOTENT_REPLAYED: Final = {
    "description": "`true` when an Idempotency-Key repeated an earlier request: its response",
    "schema": {"type": "string", "enum": ["true"]},
}


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/problem+json": {"schema": _PROBLEM_REF}},
    }


def _traces_operation(operation: dict[str, Any]) -> None:
    """`POST /v1/traces` as OTLP/HTTP defines it: protobuf or JSON in, the same out."""
    operation["requestBody"] = {
        "required": True,
        "content": {
            "application/x-protobuf": {
                "schema": {"type": "string", "format": "binary"},
                "example": "(an ExportTraceServiceRequest, binary)",
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "description": "ExportTraceServiceRequest (OTLP/JSON)",
                },
                "example": {"resourceSpans": []},
            },
        },
    }
    responses = operation["responses"]
    responses["200"] = {
        "description": "ExportTraceServiceResponse in the request's encoding "
        "(`partialSuccess` when root spans were rejected)",
        "content": {
            "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": {"type": "object"}, "example": {}},
        },
    }
    responses["400"] = _problem("Not an OTLP trace export (exporters do not retry it)")
    responses["415"] = _problem("Another content type or encoding")


def contract(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document: FastAPI's, plus what it cannot derive — the suite body typed from
    the suite model, `/v1/traces` with both encodings, examples and response headers."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    document = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    suite = Suite.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas.update(suite.pop("$defs", {}))
    schemas["Suite"] = suite
    paths = document["paths"]
    publish = paths["/suites"]["post"]
    publish["requestBody"] = {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/Suite"},
                "example": SUITE_EXAMPLE,
            }
        },
    }
    for path in ("/runs", "/gate"):
        operation = paths[path]["post"]
        operation["requestBody"]["content"]["application/json"]["example"] = RUN_EXAMPLE
        for status, response in operation["responses"].items():
            if status in ("200", "201"):
                response.setdefault("headers", {})["Idempotent-Replayed"] = _IDEMPOTENT_REPLAYED
            if status == "202":
                response["content"]["application/json"]["example"] = ACCEPTED_EXAMPLE
    cases = paths["/runs/{run_id}/cases"]["get"]["responses"]["200"]
    cases["content"]["application/json"]["example"] = CASES_EXAMPLE
    _traces_operation(paths["/v1/traces"]["post"])
    app.openapi_schema = document
    return document
