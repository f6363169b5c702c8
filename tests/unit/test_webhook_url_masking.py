"""Issue 29 (low): `hbgw config` printed the path of HBGW_WEBHOOK_URL
(``/p/HookPathSecret?token=********``), which the docs and the logs treat as secret: a
webhook URL's token is often its path. Its path and query are starred whole; the scheme, host
and port stay, so the line still says where replies go."""

from __future__ import annotations

import pytest

from hbgw.core.masking import STARS, mask_webhook_url
from hbgw.core.settings import Settings

URL = "https://hooks.example:8443/p/HookPathSecret?token=tok-1&sig=abc"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (URL, f"https://hooks.example:8443/{STARS}"),
        ("http://hooks.example/", "http://hooks.example/"),
        ("http://hooks.example", "http://hooks.example"),
        ("https://hooks.example?k=v", f"https://hooks.example/{STARS}"),
        ("https://user:pw-1@hooks.example/in", f"https://user:{STARS}@hooks.example/{STARS}"),
    ],
)
def test_a_webhook_url_keeps_only_where_it_goes(url: str, shown: str) -> None:
    assert mask_webhook_url(url) == shown


def test_config_stars_the_webhook_urls_path_and_query() -> None:
    shown = Settings(webhook_url=URL).masked()["webhook_url"]
    assert shown == f"https://hooks.example:8443/{STARS}"
    for secret in ("HookPathSecret", "tok-1", "abc"):
        assert secret not in shown
