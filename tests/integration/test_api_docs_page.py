"""Issue 20, item 9: `/docs` works on a site without the internet — Swagger UI's script and
styles come from the API itself, never a CDN; ReDoc (CDN-only) is not served."""

from __future__ import annotations

import re

from support.api_fixtures import Api


def test_the_docs_page_loads_every_asset_from_the_api(api: Api) -> None:
    with api.client(None) as anyone:
        page = anyone.get("/docs")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", page.text)
        urls += re.findall(r"""url:\s*['"]([^'"]+)['"]""", page.text)  # what the script loads
        assert urls and not [u for u in urls if "//" in u], urls  # no other host, no CDN
        assets = [u for u in urls if u.startswith("/docs/assets/")]
        assert {"/docs/assets/swagger-ui-bundle.js", "/docs/assets/swagger-ui.css"} <= set(assets)
        for url in urls:
            assert anyone.get(url).status_code == 200, url
        assert "SwaggerUIBundle" in anyone.get("/docs/assets/swagger-ui-bundle.js").text
        assert anyone.get("/docs/oauth2-redirect").status_code == 200
        assert anyone.get("/redoc").status_code == 404
        metrics = anyone.get("/metrics").text
    # A request for each file is not a series each: asset paths stay out of the labels.
    assert "swagger-ui-bundle.js" not in metrics
