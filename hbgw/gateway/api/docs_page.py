"""`/docs`: Swagger UI served with its assets from the API itself, for sites without the internet.

FastAPI's own page loads Swagger UI's script and styles from a CDN, so an offline site (or one
whose browsers may not reach a CDN) saw a blank page. The assets come from the
``swagger-ui-bundle-v2`` wheel (Swagger UI 5, which renders OpenAPI 3.1) and are served under
``/docs/assets``; ReDoc, which has no offline bundle here, is not served.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

DOCS = "/docs"
ASSETS = "/docs/assets"


def offline_app(title: str, **options: Any) -> FastAPI:
    """A FastAPI app whose `/docs` is ours: FastAPI's own loads its assets from a CDN."""
    app = FastAPI(title=title, docs_url=None, redoc_url=None, **options)
    mount(app, title)
    return app


def mount(app: FastAPI, title: str) -> None:
    app.mount(ASSETS, StaticFiles(directory=str(swagger_ui_path)), name="swagger-ui")
    redirect = f"{DOCS}/oauth2-redirect"

    async def page() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{title} — API",
            swagger_js_url=f"{ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS}/favicon-32x32.png",
            oauth2_redirect_url=redirect,
        )

    async def oauth2_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    app.add_api_route(DOCS, page, methods=["GET"], include_in_schema=False)
    app.add_api_route(redirect, oauth2_redirect, methods=["GET"], include_in_schema=False)
