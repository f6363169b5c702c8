"""HBGW_PLATFORMS naming a platform is checked by the roles that serve platforms — the API and
the workers — with a sentence; beat and Flower, which serve none and get none of the platforms'
secrets, start with the same shared settings (a Helm ConfigMap, `hbgw up`'s environment)."""

from __future__ import annotations

import pytest

from hbgw.celery_app import make_celery
from hbgw.core.errors import BadInput
from hbgw.core.settings import Settings
from hbgw.gateway.platforms.served import Served


@pytest.mark.parametrize("platform", ["slack", "telegram", "discord", "webhook"])
def test_a_named_platform_without_its_settings_stops_the_roles_that_serve_it(
    platform: str,
) -> None:
    settings = Settings(platforms=f"{platform},cli")  # beat's view: no platform secrets
    make_celery(settings, "redis://127.0.0.1:6379/0")  # beat and Flower build their app
    with pytest.raises(BadInput, match=f"HBGW_PLATFORMS names {platform}: set HBGW_"):
        Served.from_settings(settings)


def test_every_missing_platform_is_named_at_once() -> None:
    with pytest.raises(BadInput) as refused:
        Served.from_settings(Settings(platforms="slack,telegram"))
    assert "names slack" in str(refused.value) and "names telegram" in str(refused.value)
